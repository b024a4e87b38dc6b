#!/usr/bin/env bash
# One GPU round for issue #15's mid-size Qs, on the GPU machine, repository root (doit as a wheel
# in .whl/):
#   0. the machine's CPUs (lscpu) into the summary;
#   1. synthetic Qs of MID_OPS ops (codegen.sample.synth --large-ops: the same keys on every
#      machine) swept at every chunking up to MAX_CHUNK ops (bench/sweep.py at the launcher's
#      2,048-block waves, every chunk kernel's registers recorded: what tests/test_autotune.py
#      replays the tuner on), q compared across all of them;
#   2. those of BUILD_OPS ops (default MID_OPS) each built cold by this tree with autotune at -j 2
#      and at -j $(nproc), one object cache each: wall and CPU, and the tune's probes.
# Usage: bash bench/midsize_round.sh OUT     Limits (s): SWEEP_S=300 BUILD_S=240 (0 = skip).
set -uo pipefail
OUT=${1:?usage: midsize_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
# uniform field elements, as the prover's extended-domain columns are: the default mix of small
# words makes many rows' Q small, and such rows run the value path's exact fallback (a first run
# of this round without it timed that fallback: 0.2x the interpreter)
export BENCH_INPUTS=${BENCH_INPUTS:-uniform}
lscpu | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|CPU max MHz)' | tee -a "$S"
MID_OPS=${MID_OPS:-3000 8000}
rm -rf /tmp/mid; mkdir -p /tmp/mid
for n in $MID_OPS; do python3 -m codegen.sample.synth /tmp/mid/k$n --large-ops "$n" > /dev/null; done

if [ "${SWEEP_S:-300}" -gt 0 ]; then
  echo "$(el) sweep" | tee -a "$S"
  timeout "${SWEEP_S:-300}" python3 bench/sweep.py $(for n in $MID_OPS; do echo --pk /tmp/mid/k$n; done) \
    --rows 22 --reps 5 --waves 2048 --max-chunk "${MAX_CHUNK:-384}" --out "$OUT" \
    --budget-s $(( ${SWEEP_S:-300} - 20 )) > "$OUT/sweep.log" 2>&1
  echo "rc $?" | tee -a "$S"; tail -20 "$OUT/sweep.log" | tee -a "$S"
fi

if [ "${BUILD_S:-240}" -gt 0 ]; then
  end=$(( $(date +%s) + ${BUILD_S:-240} ))
  for n in ${BUILD_OPS:-$MID_OPS}; do
    for j in 2 "$(nproc)"; do
      left=$(( end - $(date +%s) )); [ $left -gt 5 ] || { echo "build: time up" | tee -a "$S"; break 2; }
      rm -rf /tmp/mid/b$n-$j /tmp/mid/c$n-$j /tmp/mid/p$n-$j; cp -r /tmp/mid/k$n /tmp/mid/p$n-$j
      echo "$(el) build $n ops -j $j" | tee -a "$S"
      EXPS_CACHE_DIR=/tmp/mid/c$n-$j /usr/bin/time -a -o "$OUT/build-time.txt" -f "$n -j $j: wall %e s, CPU %U + %S s" \
        timeout $left python3 -m codegen.cli build /tmp/mid/p$n-$j --arch 90 -j "$j" --build-dir /tmp/mid/b$n-$j \
        > /tmp/mid/log$n-$j 2>&1
      grep -h "autotune" /tmp/mid/log$n-$j | sed "s/^/$n -j $j: /" >> "$OUT/build-tune.txt"
      tail -1 "$OUT/build-time.txt" | tee -a "$S"
    done
  done
fi
rm -f "$OUT/sweep_partial.txt"   # at most 8 files come back
echo "$(el) done" | tee -a "$S"
