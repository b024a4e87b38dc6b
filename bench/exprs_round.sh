#!/usr/bin/env bash
# Second call of a GPU round (after bench/check_round.sh on the same warm machine, which left the
# after and before builds in /tmp/after and /tmp/before): bench/exprs.py on the AIRs matching
# EXPRS_AIRS (substrings, space-separated; default: all) of both builds, same seed and rows, then
# bench/exprs_compare.py and bench/h14_tables.py. Usage: bash bench/exprs_round.sh OUT    Limits (s): EXPRS_S=240 (each side).
set -uo pipefail
OUT=${1:?usage: exprs_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
airs=(); for a in ${EXPRS_AIRS:-}; do airs+=(--air "$a"); done
for side in after before; do
  pks=(); for d in /tmp/$side/*/pk; do [ -d "$d" ] && pks+=(--pk "$d"); done
  [ ${#pks[@]} -gt 0 ] || { echo "no $side builds in /tmp/$side (run check_round.sh first)" | tee -a "$S"; exit 1; }
  timeout $(( ${EXPRS_S:-240} + 30 )) python3 bench/exprs.py "${pks[@]}" "${airs[@]}" --rows 22 --reps ${EXPRS_REPS:-5} \
    --warmup 2 --seed 1 --oracle-rows 10 --out "$OUT/exprs-$side" --budget-s "${EXPRS_S:-240}" > "$OUT/exprs-$side.log" 2>&1
  echo "$(el) exprs $side: $(tail -1 "$OUT/exprs-$side.log")" | tee -a "$S"
done
python3 bench/exprs_compare.py "$OUT/exprs-after/exprs.json" "$OUT/exprs-before/exprs.json" | tee "$OUT/exprs-compare.md" | tail -1 | tee -a "$S"
# issue #14's must-show tables (bench/h14_tables.py; check_round.sh's bench.json in the same OUT, or Q_JSON;
# the original's column needs ../shared/docs/anchors-h200.md, else it is left empty: rerun on the host)
q=${Q_JSON:-$OUT/bench.json}; qa=(); [ -f "$q" ] && qa=(--q "$q")
python3 bench/h14_tables.py "${qa[@]}" --exprs "$OUT/exprs-after/exprs.json" > "$OUT/h14.md" 2>&1 &&
  grep -h "Must-show" "$OUT/h14.md" | tee -a "$S"
echo "$(el) done" | tee -a "$S"
