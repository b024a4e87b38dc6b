#!/usr/bin/env bash
# GPU round for the rows per thread of the inverse-mode expression launches (issue #14): the keys
# matching KEYS_RE (a bash regex; default intermediate_sums|connection|range_check|sample) built by
# this tree with EXPS_INV_ROWS = each of ROWS (default "1 4 8 16"; the default in templates/ is 8)
# as the only difference (the #define of exps_abi.h rewritten in a copy of the tree), all at once;
# `exps-codegen gpucheck` of each build (bit-identity on the GPU); then bench/exprs.py on each, same
# seed and rows, compared with bench/exprs_compare.py against the first of ROWS.
# Usage: bash bench/inv_rows_round.sh OUT   Limits (s): BUILD_S=120 GPUCHECK_S=60 EXPRS_S=60 (each).
set -uo pipefail
OUT=${1:?usage: inv_rows_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
ROWS=(${ROWS:-1 4 8 16})
re=${KEYS_RE:-intermediate_sums|connection|range_check|sample}
keys=(); for pk in .pk/*/provingKey provingkey-sample; do [[ $pk =~ $re ]] && keys+=("$pk"); done
dl=$(( $(date +%s) + ${BUILD_S:-120} ))
for r in "${ROWS[@]}"; do
  t=/tmp/inv$r; variant_tree "$t"
  sed -i "s/^#define EXPS_INV_ROWS 8\b/#define EXPS_INV_ROWS $r/" "$t/tree/templates/exps_abi.h"
  [ "$(grep -c "^#define EXPS_INV_ROWS $r\b" "$t/tree/templates/exps_abi.h")" = 1 ] \
    || { echo "rows $r: the #define was not rewritten" | tee -a "$S"; exit 1; }
  build_variant "$t" "$dl" "rows $r" "${keys[@]}"
done
wait
for r in "${ROWS[@]}"; do echo "$(el) rows $r built: $(find /tmp/inv$r -name '*.exps.so' | wc -l) .so" | tee -a "$S"; done
end=$(( $(date +%s) + ${GPUCHECK_S:-60} ))
for r in "${ROWS[@]}"; do
  for d in /tmp/inv$r/[0-9]*; do
    left=$(( end - $(date +%s) )); [ $left -gt 3 ] || { echo "gpucheck: time up at rows $r $d" | tee -a "$S"; break 2; }
    timeout $left python3 -m codegen.cli gpucheck "$d/pk" --arch 90 --build-dir "$d/b" >> "$OUT/gpucheck-rows$r.log" 2>&1
    echo "rows $r: $(tail -1 "$OUT/gpucheck-rows$r.log")" | tee -a "$S"
  done
done
airs=(); for a in ${EXPRS_AIRS:-}; do airs+=(--air "$a"); done
for r in "${ROWS[@]}"; do
  pks=(); for d in /tmp/inv$r/[0-9]*; do pks+=(--pk "$d/pk"); done
  timeout $(( ${EXPRS_S:-60} + 30 )) python3 bench/exprs.py "${pks[@]}" "${airs[@]}" --rows 22 --reps ${EXPRS_REPS:-5} \
    --warmup 2 --seed 1 --oracle-rows 10 --out "$OUT/exprs-rows$r" --budget-s "${EXPRS_S:-60}" > "$OUT/exprs-rows$r.log" 2>&1
  echo "$(el) exprs rows $r: $(tail -1 "$OUT/exprs-rows$r.log")" | tee -a "$S"
done
for r in "${ROWS[@]:1}"; do
  python3 bench/exprs_compare.py "$OUT/exprs-rows$r/exprs.json" "$OUT/exprs-rows${ROWS[0]}/exprs.json" > "$OUT/exprs-rows$r-vs-${ROWS[0]}.md"
  echo "rows $r vs ${ROWS[0]}: $(tail -1 "$OUT/exprs-rows$r-vs-${ROWS[0]}.md")" | tee -a "$S"
done
echo "$(el) done" | tee -a "$S"
