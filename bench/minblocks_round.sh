#!/usr/bin/env bash
# A/B of the single Q kernel's register budget (issue #14): the small AIRs' kernels are compute-
# bound at 0.7 issued warp instructions per scheduler with ~30% of cycles no warp eligible and an
# occupancy limited by registers (Nsight Compute, bench/ncu_small.sh). Builds the keys matching
# KEYS_RE with this tree and with copies whose single Q kernel is __launch_bounds__(256, B) for each
# B in MINB (default "6 8": at most 40 / 32 registers), each with its own autotune, then
# bench/run.py of every variant against this tree's build, same run (the variant's bound replaces
# the tune's own, autotune.bound_single). MINB_WHERE=chunked bounds the
# chunk kernels of chunked plans instead (issue #13: a 96-op chunk of the sample's Large takes 170
# registers, one 256-thread block per SM). Usage:
#   bash bench/minblocks_round.sh OUT     Limits (s): BUILD_S=120 BENCH_S=80 (each variant).
set -uo pipefail
OUT=${1:?usage: minblocks_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
re=${KEYS_RE:-fibonacci|lookup|range_check|simple|sample|connection|diff_buses}
keys=(); for pk in .pk/*/provingKey provingkey-sample; do [[ $pk =~ $re ]] && keys+=("$pk"); done
dl=$(( $(date +%s) + ${BUILD_S:-120} ))
for v in base ${MINB:-6 8}; do
  t=/tmp/mb$v; variant_tree "$t"
  if [ $v != base ]; then
    cond=single; [ "${MINB_WHERE:-single}" = chunked ] && cond="not single"
    sed -i "s/^__global__ void __launch_bounds__(256{{ bound }})\$/__global__ void __launch_bounds__(256{% if $cond %}, $v{% else %}{{ bound }}{% endif %})/" "$t/tree/templates/q_chunks.cu.j2"
    grep -q "{% if $cond %}, $v{% endif %}" "$t/tree/templates/q_chunks.cu.j2" || { echo "minb $v: not rewritten" | tee -a "$S"; exit 1; }
  fi
  build_variant "$t" "$dl" "$v" "${keys[@]}"
done
wait
for v in base ${MINB:-6 8}; do echo "$(el) $v built: $(find /tmp/mb$v -name '*.exps.so' | wc -l) .so" | tee -a "$S"; done
airs=(); for a in ${AIRS:-U8Air Tiny Lookup0 Air1 FibonacciSquare SimpleRight RangeCheck1 Module MultiRangeCheck1 Connection1 RangeCheck4 Shared SpecifiedRanges}; do airs+=(--air "$a"); done
for v in ${MINB:-6 8}; do
  a=(); b=(); for d in /tmp/mb$v/[0-9]*; do n=$(basename $d); a+=(--pk $d/pk --build-dir $d/b); b+=(--before /tmp/mbbase/$n/pk --before-build-dir /tmp/mbbase/$n/b); done
  mkdir -p "$OUT/minb$v"
  timeout $(( ${BENCH_S:-80} + 20 )) python3 bench/run.py "${a[@]}" "${b[@]}" "${airs[@]}" --rows 22 --reps 5 --warmup 2 --no-smem \
    --oracle-rows 10 --out "$OUT/minb$v" --budget-s ${BENCH_S:-80} 2>&1 | grep -E '^\||AIRs, before' > "$OUT/minb$v/table.md"
  echo "$(el) minb $v: $(tail -1 "$OUT/minb$v/table.md")" | tee -a "$S"
done
