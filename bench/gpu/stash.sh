#!/usr/bin/env bash
# Device call 1 (carry [".gpu/1"]): leaves part 1 of Warp's archive on the machine.
set -euo pipefail
mkdir -p /tmp/mjsysid-gpu && cp .gpu/1/warp.tar.xz.part* /tmp/mjsysid-gpu/ && ls -la /tmp/mjsysid-gpu
