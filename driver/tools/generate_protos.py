# SPDX-License-Identifier: Apache-2.0
"""Generate the Python gRPC code of the driver from its .proto files.

The generated modules are committed next to the .proto files (so installing
the driver needs no protoc); tests regenerate them into a temporary directory
and fail when the committed copies differ. Run after editing a .proto file::

    .venv/bin/python driver/tools/generate_protos.py            # rewrite in place
    .venv/bin/python driver/tools/generate_protos.py --out DIR  # write elsewhere
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DRIVER_DIR = Path(__file__).resolve().parent.parent
PROTO_DIR = DRIVER_DIR / "aligned_dra_driver" / "kubelet" / "proto"
PROTOS = ("registration.proto", "dra_v1.proto", "dra_v1beta1.proto", "health_v1alpha1.proto")


def generate(out: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on every .proto; return the generated files."""
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    for name in PROTOS:
        source = PROTO_DIR.relative_to(DRIVER_DIR) / name
        args = [
            "protoc",
            f"-I{DRIVER_DIR}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(source),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {source}")
    generated = sorted((out / PROTO_DIR.relative_to(DRIVER_DIR)).glob("*_pb2*.py"))
    return generated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write under this directory instead of the driver tree")
    args = parser.parse_args()
    target = args.out or DRIVER_DIR
    for path in generate(target):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
