#!/usr/bin/env bash
# Device call 2 (carry [".gpu/2"], right after stash.sh): installs MuJoCo, MuJoCo Warp and
# Warp into /tmp/site and runs the populations bench on the GPU against the CPU batch on
# the machine's own cores, then the Furuta far start of issue #31 end to end with its
# populations on the CPU and on the GPU; output in $OUT.
#   bash bench/gpu/run.sh [warp_populations.py arguments; default:
#                          --device cuda:0 --threads $(nproc)]
set -euo pipefail
site=/tmp/site
mkdir -p "$site"
if ! ls /tmp/mjsysid-gpu/warp.tar.xz.part0 >/dev/null 2>&1; then
  echo "run.sh: part 1 of Warp's archive is not on this machine (/tmp/mjsysid-gpu):" \
    "the machine was given back after stash.sh, or stash.sh did not run; run it, then" \
    "this at once" >&2
  exit 2
fi
cp .gpu/2/warp.tar.xz.part* /tmp/mjsysid-gpu/
cat /tmp/mjsysid-gpu/warp.tar.xz.part* > /tmp/mjsysid-gpu/warp.tar.xz
echo "$(cat .gpu/2/warp.tar.xz.sha256)  /tmp/mjsysid-gpu/warp.tar.xz" | sha256sum -c -
xz -d -c /tmp/mjsysid-gpu/warp.tar.xz | tar -x -C "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" .gpu/2/whl/*.whl
export PYTHONPATH="$site:$PWD/src" PYTHONUNBUFFERED=1 MUJOCO_GL=disable
out=${OUT:-/tmp/mjsysid-gpu/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
nproc | tee -a "$out/gpu.txt"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--device cuda:0 --threads "$(nproc)")
cd bench
python3 warp_populations.py "${args[@]}" --json "$out/warp_populations.jsonl" 2>&1 \
  | tee "$out/warp_populations.log"
# the Furuta far start of issue #31 end to end (its CPU figures are in bench/README.md),
# populations on the machine's CPU cores, then on the GPU
for rollout in cpu warp; do
  python3 furuta_doc_fit.py --far 0.1 --window 0.5 --rollout "$rollout" 2>&1 \
    | tee "$out/furuta_far_$rollout.log"
done
