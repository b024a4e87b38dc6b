#!/usr/bin/env bash
# One GPU round for the launch shape and the cost model (issue #13) and the 100,000-op Q (#15),
# on the GPU machine, repository root (.pk/ = a copy of ../shared/pk; doit as a wheel in .whl/):
#   1. bench/sweep.py: every AIR of >= MIN_OPS Q ops built at every candidate chunking, each chunked
#      build timed at every wave size in WAVES (blocks of 256 rows), q compared across all of them;
#   2. a synthetic Q of BIG_OPS ops (codegen.sample.synth --large-ops) built with autotune, timed by
#      bench/run.py against the interpreter (q word for word; oracle at 2^10) and gpucheck'ed.
# Usage: bash bench/wave_round.sh OUT      Stage limits (s): SWEEP_S=330 BIG_S=300 (0 = skip).
set -uo pipefail
OUT=${1:?usage: wave_round.sh OUT}
. "$(dirname "$0")/round_env.sh"

WAVES=${WAVES:-132,264,396,512,528,660,792,1056,1584,2112,3168}
if [ "${SWEEP_S:-330}" -gt 0 ]; then
  echo "$(el) sweep" | tee -a "$S"
  timeout "${SWEEP_S:-330}" python3 bench/sweep.py --pk provingkey-sample $(ls -d .pk/*/provingKey | sed 's/^/--pk /') \
    --rows 22 --reps 5 --min-ops "${MIN_OPS:-60}" --max-chunk "${MAX_CHUNK:-128}" --waves "$WAVES" --out "$OUT" \
    --budget-s $(( ${SWEEP_S:-330} - 20 )) > "$OUT/sweep.log" 2>&1
  echo "rc $?" | tee -a "$S"; tail -30 "$OUT/sweep.log" | tee -a "$S"
fi

if [ "${BIG_S:-300}" -gt 0 ]; then
  end=$(( $(date +%s) + ${BIG_S:-300} ))
  echo "$(el) big Q" | tee -a "$S"
  rm -rf /tmp/big /tmp/bigb
  python3 -m codegen.sample.synth /tmp/big --large-ops "${BIG_OPS:-100000}" | tee -a "$S"
  t=$(date +%s)
  /usr/bin/time -f "big build: wall %e s, CPU %U+%S s" timeout $(( end - $(date +%s) )) \
    python3 -m codegen.cli build /tmp/big --arch 90 -j "$(nproc)" --build-dir /tmp/bigb > "$OUT/big-build.log" 2>&1
  tail -3 "$OUT/big-build.log" | tee -a "$S"
  echo "$(el) big bench" | tee -a "$S"
  timeout $(( end - $(date +%s) )) python3 bench/run.py --pk /tmp/big --build-dir /tmp/bigb --rows 22 \
    --reps 3 --warmup 1 --no-smem --out "$OUT/big" 2>&1 | tail -12 | tee -a "$S"
  echo "$(el) big gpucheck" | tee -a "$S"
  timeout $(( end - $(date +%s) )) python3 -m codegen.cli gpucheck /tmp/big --arch 90 --build-dir /tmp/bigb \
    2>&1 | tail -3 | tee -a "$S"
fi
rm -f "$OUT/sweep_partial.txt" "$OUT/big/bench.png"   # at most 8 files come back
echo "$(el) done" | tee -a "$S"
