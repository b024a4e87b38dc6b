#!/usr/bin/env bash
# Variants of this tree side by side on one key (issue #13): this tree and one copy per line of
# VARIANT_SEDS (a sed expression applied to VARIANT_FILE), each building KEY (default the sample)
# with its own autotune, `exps-codegen gpucheck` of every variant's build, then one bench/run.py
# of all of them (this tree's build first), same run, on the AIRs named in AIRS.
# Usage (GPU machine): VARIANT_FILE=codegen/build/bounds.py VARIANT_SEDS=$'s/^A = 1$/A = 2/\ns/^A = 1$/A = 3/' \
#   AIRS="Large Medium" bash bench/variants_side.sh OUT     Limits (s): BUILD_S=200 GPUCHECK_S=100 BENCH_S=200
set -uo pipefail
OUT=${1:?usage: variants_side.sh OUT}
. "$(dirname "$0")/round_env.sh"
file=${VARIANT_FILE:?VARIANT_FILE}; key=${KEY:-provingkey-sample}
mapfile -t seds <<< "${VARIANT_SEDS:?VARIANT_SEDS: one sed expression per line}"
dl=$(( $(date +%s) + ${BUILD_S:-200} ))
args=(); n=0
for v in "" "${seds[@]}"; do
  t=/tmp/side/$n; variant_tree "$t"
  if [ -n "$v" ]; then
    sed -i "$v" "$t/tree/$file"
    if cmp -s "$file" "$t/tree/$file"; then echo "variant $n: '$v' changes nothing in $file" | tee -a "$S"; exit 1; fi
    echo "variant $n: $v" | tee -a "$S"
  fi
  build_variant "$t" "$dl" "variant$n" "$key"
  args+=(--pk "$t/0/pk" --build-dir "$t/0/b")
  n=$(( n + 1 ))
done
wait
echo "$(el) built: $(find /tmp/side -name '*.exps.so' | wc -l) .so" | tee -a "$S"
for j in $(seq 0 $(( n - 1 ))); do     # per kernel: ops per chunk and the chunks that run bounded
  for f in /tmp/side/$j/0/b/*/objs.json; do
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); b = d.get("bounded") or {}
t = json.load(open(sys.argv[1].replace("objs.json", "tune.json")))
print("variant", sys.argv[2], sys.argv[1].split("/")[-2], "chunk", t.get("ops_per_chunk"), "bounded", len(b),
      dict(sorted(b.items(), key=lambda x: int(x[0]))))' "$f" "$j"
  done | grep -v "bounded 0 " | tee -a "$S"
done
for j in $(seq 1 $(( n - 1 ))); do
  (cd /tmp/side/$j/tree && PYTHONPATH="/tmp/side/$j/tree:$PYTHONPATH" gpucheck_keys /tmp/side/$j 1 "$OUT/gpucheck-$j.log" \
    "${GPUCHECK_S:-100}") &
done
wait
airs=(); for x in ${AIRS:-Large Medium}; do airs+=(--air "$x"); done
timeout $(( ${BENCH_S:-200} + 20 )) python3 bench/run.py "${args[@]}" "${airs[@]}" --rows 22 --reps "${REPS:-7}" --warmup 2 \
  --no-smem --oracle-rows 10 --out "$OUT" --budget-s "${BENCH_S:-200}" 2>&1 | grep -E '^\||AIRs' | tee -a "$S"
grep -E '^\| ' "$OUT/bench.md" | tee -a "$S"     # (run.py prints no table without --before)
echo "$(el) done" | tee -a "$S"
