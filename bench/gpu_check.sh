#!/usr/bin/env bash
# On the GPU machine: build every key for sm_90, then gpucheck each (bit-identity on the device).
# Usage: bash bench/gpu_check.sh OUTDIR [PK ...]   (default: provingkey-sample and .pk/*/provingKey)
set -uo pipefail
OUT=${1:-/tmp/exps-out}; shift || true
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 EXPS_CACHE_DIR=/tmp/exps-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
nvcc --version | tail -1 >> "$OUT/gpu.txt"
keys=("$@"); [ ${#keys[@]} -gt 0 ] || keys=(provingkey-sample .pk/*/provingKey)
rc=0
for pk in "${keys[@]}"; do
  name=$(echo "$pk" | tr '/.' '__')
  t0=$(date +%s.%N)
  python3 -m codegen.cli build "$pk" --arch 90 -j 8 --build-dir "/tmp/b/$name" > "$OUT/build_$name.log" 2>&1 || { echo "BUILD FAILED $pk"; tail -20 "$OUT/build_$name.log"; rc=1; }
  t1=$(date +%s.%N)
  echo "build $pk: $(echo "$t1 - $t0" | bc) s"
  python3 -m codegen.cli gpucheck "$pk" --arch 90 --build-dir "/tmp/b/$name" 2>&1 | tee -a "$OUT/gpucheck.log" | tail -1 || rc=1
done
grep -c bit-identical "$OUT/gpucheck.log"; grep -E "MISMATCH|failing|Error|error" "$OUT/gpucheck.log" | head -20
exit $rc
