#!/usr/bin/env bash
# The sample's Large (or AIR) built by the CLI at fixed chunk sizes, twins included, and timed in
# one bench/run.py call (issue #13): is there a faster chunk size between the tuner's candidates?
# Usage (GPU machine): SIZES="112 128 144 160" AIR=Large BUILD_S=200 BENCH_S=200 bash bench/chunk_sizes.sh OUT
set -uo pipefail
OUT=${1:?usage: chunk_sizes.sh OUT}
. "$(dirname "$0")/round_env.sh"
key=${KEY:-provingkey-sample}
dl=$(( $(date +%s) + ${BUILD_S:-200} ))
args=()
for c in ${SIZES:-112 128 144 160}; do
  d=/tmp/chunk/$c; rm -rf "$d"; mkdir -p "$d"; cp -r "$key" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
  (EXPS_CACHE_DIR=/tmp/cache-chunk timeout $(( dl - $(date +%s) )) python3 -m codegen.cli build "$d/pk" --arch 90 \
     -j 4 --chunk "$c" --build-dir "$d/b" > "$d/log" 2>&1 || echo "BUILD FAILED $c") &
  args+=(--pk "$d/pk" --build-dir "$d/b")
done
wait
for c in ${SIZES:-112 128 144 160}; do
  for f in /tmp/chunk/$c/b/*/objs.json; do
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); b = d.get("bounded") or {}
print("chunk", sys.argv[2], sys.argv[1].split("/")[-2], "bounded", len(b), dict(sorted(b.items(), key=lambda x: int(x[0]))))' "$f" "$c"
  done | grep -v "bounded 0 " | tee -a "$S"
done
echo "$(el) built" | tee -a "$S"
timeout "${BENCH_S:-200}" python3 bench/run.py "${args[@]}" --air "${AIR:-Large}" --rows 22 --reps "${REPS:-7}" --warmup 2 \
  --no-smem --oracle-rows 10 --out "$OUT" --budget-s $(( ${BENCH_S:-200} - 10 )) 2>&1 | grep -E '^\||AIRs' | tee -a "$S"
grep -E '^\| ' "$OUT/bench.md" | tee -a "$S"     # (run.py prints no table without --before)
echo "$(el) done" | tee -a "$S"
