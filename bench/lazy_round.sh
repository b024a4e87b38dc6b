#!/usr/bin/env bash
# How much would value-only arithmetic buy the real Q kernels? (issue #13 study, not a product
# change.) A kernel may compute its rows in any representation and store canon(v) wherever
# canon(v) >= EPS: a value >= EPS has one u64 encoding, so that is the word the production op order
# gives; only a row with a smaller output would need the exact forms. This round measures the
# speed side only:
#   1. bench/fieldops.py (every variant checked, `lazy` mod p; loops timed for cur and lazy);
#   2. the keys matching KEYS_RE built by this tree ("base") and by a copy whose gen_common.cuh
#      maps every device gl3_mul to gl3_mul_v with no fallback ("lazy": value-only, so its q
#      words are NOT the production's: bench/run.py says "NO" in its bit-identical column), each
#      with its own autotune; then bench/run.py lazy vs base on AIRS, same run.
# Usage: bash bench/lazy_round.sh OUT     Limits (s): FIELDOPS_S=150 BUILD_S=150 BENCH_S=120.
set -uo pipefail
OUT=${1:?usage: lazy_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
timeout "${FIELDOPS_S:-150}" python3 bench/fieldops.py --out "$OUT/fieldops" --build-dir /tmp/lzfo --variants cur,lazy \
  --n $(( 1 << 22 )) > "$OUT/fieldops.log" 2>&1
echo "$(el) fieldops: $(tail -1 "$OUT/fieldops.log")" | tee -a "$S"
re=${KEYS_RE:-sample|intermediate_sums|connection|range_check|fibonacci|lookup}
keys=(); for pk in .pk/*/provingKey provingkey-sample; do [[ $pk =~ $re ]] && keys+=("$pk"); done
dl=$(( $(date +%s) + ${BUILD_S:-150} ))
for v in base lazy; do
  t=/tmp/lz$v; variant_tree "$t"
  if [ $v = lazy ]; then
    python3 - "$t/tree/templates/gen_common.cuh" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
i = s.rindex("#endif")
open(p, "w").write(s[:i] + "#ifdef EXPS_DEVICE_PTX\n#define gl3_mul gl3_mul_v\n#endif\n" + s[i:])
EOF
    grep -q "define gl3_mul gl3_mul_v" "$t/tree/templates/gen_common.cuh" || { echo "lazy: not rewritten" | tee -a "$S"; exit 1; }
  fi
  build_variant "$t" "$dl" "$v" "${keys[@]}"
done
wait
for v in base lazy; do echo "$(el) $v built: $(find /tmp/lz$v -name '*.exps.so' | wc -l) .so" | tee -a "$S"; done
airs=(); for a in ${AIRS:-Large Medium Shared Intermediates ConnectionNew SpecifiedRanges RangeCheck4 Tiny Lookup0 U8Air FibonacciSquare Connection1}; do airs+=(--air "$a"); done
a=(); b=(); for d in /tmp/lzlazy/[0-9]*; do n=$(basename "$d"); a+=(--pk "$d/pk" --build-dir "$d/b"); b+=(--before "/tmp/lzbase/$n/pk" --before-build-dir "/tmp/lzbase/$n/b"); done
mkdir -p "$OUT/q"
timeout $(( ${BENCH_S:-120} + 20 )) python3 bench/run.py "${a[@]}" "${b[@]}" "${airs[@]}" --rows 22 --reps 5 --warmup 2 --no-smem \
  --oracle-rows 10 --out "$OUT/q" --budget-s "${BENCH_S:-120}" 2>&1 | grep -E '^\||AIRs, before' > "$OUT/q/table.md"
echo "$(el) lazy vs base: $(tail -1 "$OUT/q/table.md")" | tee -a "$S"
