#!/usr/bin/env bash
# Second call of a GPU round (after bench/check_round.sh on the same warm machine, which left this
# tree's builds in /tmp/after): a variant of this tree, one sed expression VARIANT_SED applied to
# VARIANT_FILE (default codegen/emit.py; the round stops if it changes nothing), builds the keys
# matching KEYS_RE with its own autotune, `exps-codegen gpucheck` of each, then bench/run.py of the
# variant against this tree's build (--before), same run, on the AIRs named in AIRS.
# Usage: VARIANT_SED='s/^X = 6$/X = 1/' bash bench/variant_round.sh OUT
# Limits (s): BUILD_S=120 GPUCHECK_S=60 BENCH_S=120.
set -uo pipefail
OUT=${1:?usage: variant_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
: "${VARIANT_SED:?VARIANT_SED: the sed expression that makes the variant}"
file=${VARIANT_FILE:-codegen/emit.py}
t=/tmp/variant; variant_tree "$t"
sed -i "$VARIANT_SED" "$t/tree/$file"
if cmp -s "$file" "$t/tree/$file"; then echo "variant: '$VARIANT_SED' changes nothing in $file" | tee -a "$S"; exit 1; fi
diff "$file" "$t/tree/$file" | tee -a "$S"
re=${KEYS_RE:-.}
keys=(); idx=(); i=0
for pk in .pk/*/provingKey provingkey-sample; do      # check_round.sh's key order: /tmp/after/<i>
  [[ $pk =~ $re ]] && { keys+=("$pk"); idx+=("$i"); }
  i=$(( i + 1 ))
done
build_variant "$t" $(( $(date +%s) + ${BUILD_S:-120} )) variant "${keys[@]}"
wait
echo "$(el) variant built: $(find $t -name '*.exps.so' | wc -l) .so" | tee -a "$S"
n=${#keys[@]}
(cd "$t/tree" && PYTHONPATH="$t/tree:$PYTHONPATH" gpucheck_keys "$t" "$n" "$OUT/gpucheck-variant.log" "${GPUCHECK_S:-60}")
a=(); b=()
for j in $(seq 0 $(( n - 1 ))); do
  a+=(--pk "$t/$j/pk" --build-dir "$t/$j/b")
  b+=(--before "/tmp/after/${idx[$j]}/pk" --before-build-dir "/tmp/after/${idx[$j]}/b")
done
airs=(); for x in ${AIRS:-U8Air U16Air Air1 Tiny Lookup3 FibonacciSquare SimpleRight Connection1}; do airs+=(--air "$x"); done
timeout $(( ${BENCH_S:-120} + 20 )) python3 bench/run.py "${a[@]}" "${b[@]}" "${airs[@]}" --rows 22 --reps 5 --warmup 2 \
  --no-smem --oracle-rows 10 --out "$OUT/variant" --budget-s "${BENCH_S:-120}" 2>&1 | grep -E '^\||AIRs, before' \
  | tee "$OUT/variant-table.md" | tail -1 | tee -a "$S"
echo "$(el) done" | tee -a "$S"
