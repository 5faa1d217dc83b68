# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: full 4096-byte config spaces with ACS for the GPUDirect part of the fake tree.

``python3 acs_configs.py SYS_ROOT BDF=CONTROL ...`` keeps each function's
64-byte header, fills the rest with a pattern, puts AER at 0x100 and ACS at
0x148 (ACS Control at 0x14e = CONTROL); ``BDF=-`` gives no ACS capability.
"""

import os
import struct
import sys

ACS_AT = 0x148


def config(header: bytes, control):
    space = bytearray((i * 7 + 3) & 0xFF for i in range(4096))
    space[: len(header)] = header
    struct.pack_into("<I", space, 0x100, 0x0001 | (1 << 16) | ((ACS_AT if control is not None else 0) << 20))
    if control is not None:
        struct.pack_into("<IHH", space, ACS_AT, 0x000D | (1 << 16), 0x005F, control)
    return bytes(space)


def main(argv):
    root = argv[0]
    for item in argv[1:]:
        bdf, control = item.split("=")
        path = os.path.join(root, "bus", "pci", "devices", bdf, "config")
        with open(path, "rb") as fh:
            header = fh.read(64)
        with open(path, "wb") as fh:
            fh.write(config(header, None if control == "-" else int(control, 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
