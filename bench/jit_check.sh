#!/usr/bin/env bash
# After bench/check_round.sh (its builds in /tmp/after/<i>, /tmp/before/<i>): (1) `exps-codegen
# gpucheck` of keys I... with CUDA_FORCE_PTX_JIT=1, so the driver JIT-compiles every fatbin's PTX
# instead of loading its SASS: the path a GPU newer than the build's arch takes (the twins made from
# PTX, twin_ptx.py, embed their edited PTX); (2) every .so built both before and after compared
# kernel by kernel (cuobjdump -sass, addresses and blank lines left out).
# Usage: bash bench/jit_check.sh OUT I...    Limit: JIT_S=150 seconds per key.
set -uo pipefail
OUT=${1:?usage: jit_check.sh OUT I...}; shift
mkdir -p "$OUT"
for i in "$@"; do
  CUDA_FORCE_PTX_JIT=1 timeout "${JIT_S:-150}" python3 -m codegen.cli gpucheck /tmp/after/$i/pk --arch 90 \
    --build-dir /tmp/after/$i/b > "$OUT/gpucheck-jit-$i.log" 2>&1
  echo "JIT gpucheck key $i: rc $? $(tail -1 "$OUT/gpucheck-jit-$i.log")" | tee -a "$OUT/summary.txt"
done
sass() { cuobjdump -sass "$1" | sed -E 's@/\*[0-9a-f]{4}\*/@@' | grep -v '^[[:space:]]*$'; }
for b in $(cd /tmp/before 2>/dev/null && find . -name '*.exps.so' | sort); do
  if cmp -s <(sass "/tmp/before/$b") <(sass "/tmp/after/$b"); then r=same; else r=DIFFERENT; fi
  echo "SASS before vs after $b: $r" | tee -a "$OUT/summary.txt"
done
