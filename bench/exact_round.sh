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
variant_tree /tmp/exact
NVCC_APPEND_FLAGS=-DEXPS_FORCE_EXACT build_variant /tmp/exact $(( $(date +%s) + ${BUILD_S:-120} )) exact "${keys[@]}"
wait
echo "$(el) built (every Q row exact): $(find /tmp/exact -name '*.exps.so' | wc -l) .so" | tee -a "$S"
gpucheck_keys /tmp/exact ${#keys[@]} "$OUT/gpucheck-exact.log" "${GPUCHECK_S:-120}"
