# SPDX-License-Identifier: Apache-2.0
"""gRPC code generated from the .proto files here (driver/tools/generate_protos.py); imports nothing of the driver."""
