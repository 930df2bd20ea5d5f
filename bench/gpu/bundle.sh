#!/usr/bin/env bash
# Builds, here, what the device machine needs to run bench/warp_populations.py on its GPU
# (issue #29), as two carry folders of the device tool: .gpu/1 and .gpu/2.
#
# Why two: the device image (Python 3.12, numpy, scipy, PyYAML, filelock, absl-py, etils)
# has neither MuJoCo nor Warp, nothing can be fetched there, and one call carries at most
# 64 MiB with the working tree (~5 MB). warp-lang 1.19's wheel is 149 MB (warp.so alone
# 285 MB unpacked); without its examples and tests, tar + xz -9 makes it ~95 MB. So the
# archive is cut in two: call 1 leaves part 1 on the machine, call 2 (within the machine's
# 30 s idle release) brings part 2 and the other wheels, and runs (bench/gpu/README.md).
#
# Usage (repo root, the development venv active; needs the package registry; ~4 min):
#   bash bench/gpu/bundle.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >> .git/info/exclude; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf .gpu && mkdir -p .gpu/1 .gpu/2/whl
# cp312 manylinux wheels, without their dependencies (the image has numpy and the rest)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$stage" \
  warp-lang==1.19.0 mujoco-warp==4.0.0 mujoco==4.0.1 mujoco-core==4.0.1 \
  pydantic pydantic-core annotated-types typing-inspection typing-extensions cmaes
mv "$stage"/mujoco_warp-*.whl "$stage"/mujoco-4*.whl "$stage"/mujoco_core-*.whl \
  "$stage"/pydantic*.whl "$stage"/annotated_types-*.whl "$stage"/typing_inspection-*.whl \
  "$stage"/typing_extensions-*.whl "$stage"/cmaes-*.whl .gpu/2/whl/
mkdir "$stage/x"
(cd "$stage/x" && python3 -m zipfile -e "$stage"/warp_lang-*.whl . \
  && tar -c --exclude=warp/examples --exclude=warp/tests warp warp_lang-*.dist-info \
  | xz -9 -T0 > "$stage/warp.tar.xz")
# part 1 as large as a call allows beside the working tree; the rest goes with call 2
(cd "$stage" && split -b 56M -d -a 1 warp.tar.xz warp.tar.xz.part)
mv "$stage"/warp.tar.xz.part0 .gpu/1/
mv "$stage"/warp.tar.xz.part* .gpu/2/
(cd "$stage" && sha256sum warp.tar.xz | cut -d' ' -f1) > .gpu/2/warp.tar.xz.sha256
du -sh .gpu/1 .gpu/2
