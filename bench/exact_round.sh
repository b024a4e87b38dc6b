#!/usr/bin/env bash
# The exact program on the GPU (docs/DESIGN-value-path.md): every key built with
# -DEXPS_FORCE_EXACT (NVCC_APPEND_FLAGS: cache-keyed, so apart from the normal objects), where no
# Q row takes the value path and every row runs its kernel's exact program, then
# `exps-codegen gpucheck` of each (the oracle's words, every row). Usage:
#   bash bench/exact_round.sh OUT     Limits (s): BUILD_S=120 GPUCHECK_S=120.
set -uo pipefail
OUT=${1:?usage: exact_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
keys=(.pk/*/provingKey provingkey-sample)
dl=$(( $(date +%s) + ${BUILD_S:-120} ))
i=0
for pk in "${keys[@]}"; do
  d=/tmp/exact/$i; rm -rf "$d"; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
  (NVCC_APPEND_FLAGS=-DEXPS_FORCE_EXACT EXPS_CACHE_DIR=/tmp/cache-exact timeout $(( dl - $(date +%s) )) \
    python3 -m codegen.cli build "$d/pk" --arch 90 -j 2 --build-dir "$d/b" > "$d/log" 2>&1 || echo "BUILD FAILED $pk") &
  i=$(( i + 1 ))
done
wait
echo "$(el) built (every Q row exact): $(find /tmp/exact -name '*.exps.so' | wc -l) .so" | tee -a "$S"
end=$(( $(date +%s) + ${GPUCHECK_S:-120} ))
for j in $(seq 0 $(( i - 1 ))); do
  while [ "$(jobs -rp | wc -l)" -ge "${GPUCHECK_P:-6}" ]; do sleep 0.2; done
  left=$(( end - $(date +%s) )); [ $left -gt 3 ] || { echo "gpucheck: time up at key $j" | tee -a "$S"; break; }
  timeout $left python3 -m codegen.cli gpucheck /tmp/exact/$j/pk --arch 90 --build-dir /tmp/exact/$j/b > "$OUT/exact.$j.log" 2>&1 &
done
wait
for j in $(seq 0 $(( i - 1 ))); do
  [ -f "$OUT/exact.$j.log" ] || continue
  cat "$OUT/exact.$j.log" >> "$OUT/gpucheck-exact.log"; rm -f "$OUT/exact.$j.log"
  tail -1 "$OUT/gpucheck-exact.log" | tee -a "$S"
done
