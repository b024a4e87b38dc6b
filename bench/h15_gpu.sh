#!/usr/bin/env bash
# GPU validation of the launch path of issue #15 (device TUs compiled as fatbins, no host pass; the
# .so loads them once with cudaLibraryLoadData and launches cudaKernel_t handles), on the GPU
# machine, repository root, in one call (~6 min):
#   1. bench/check_round.sh: every key (.pk/*/provingKey, provingkey-sample) built by this tree
#      (after) and by .old/ (before: `git archive 930542f`), all at once; `exps-codegen gpucheck` of
#      every after build (Q and every covered expression on device buffers vs the numpy oracle, word
#      for word); bench/run.py before vs after (same inputs, same run) on the AIRs in AIRS;
#   2. bench/launch_overhead.py on every key: host and GPU microseconds per exps_launch /
#      exps_launch_expr call at 1,024 rows (the launcher's own cost; a per-launch kernel lookup
#      would show here), and the process's first call (after: the library load);
#   3. bench/exprs_round.sh: bench/exprs.py before vs after on EXPRS_AIRS.
# Usage: rm -rf .old && mkdir .old && git archive 930542f | tar -x -C .old && bash bench/h15_gpu.sh OUT
# Limits (s): BUILD_S=150 GPUCHECK_S=150 BENCH_S=50 LAUNCH_S=45 EXPRS_S=30 (each side). Results:
# OUT/check/{summary.txt,gpucheck.log,bench.md}, OUT/launch/summary.txt, OUT/exprs/{summary.txt,exprs-compare.md}.
set -uo pipefail
OUT=${1:?usage: h15_gpu.sh OUT}
[ -d .old/codegen ] || { echo "no .old/ (the before tree: git archive 930542f | tar -x -C .old)"; exit 2; }
export BEFORE_RE=${BEFORE_RE:-.} BUILD_S=${BUILD_S:-150} GPUCHECK_S=${GPUCHECK_S:-150} BENCH_S=${BENCH_S:-50}
export AIRS=${AIRS:-Large Medium Intermediates ConnectionNew SpecifiedRanges RangeCheck4}
here=$(dirname "$0")
bash "$here/check_round.sh" "$OUT/check"                    # its summary: OUT/check/summary.txt
OUT=$OUT/launch; . "$here/round_env.sh"                     # this step's: OUT/launch/summary.txt
echo "$(el) launch overhead" | tee -a "$S"
end=$(( $(date +%s) + ${LAUNCH_S:-45} ))
for d in /tmp/after/*/; do
  i=$(basename "$d"); left=$(( end - $(date +%s) )); [ $left -gt 3 ] || break
  [ -d /tmp/before/$i/pk ] || continue
  timeout $left python3 bench/launch_overhead.py --pk /tmp/after/$i/pk --before /tmp/before/$i/pk --rounds 3 \
    --calls 1000 --out "$OUT/$i" 2>&1 | grep -E '^\||AIRs timed|Error|error' | tee -a "$S"
done
EXPRS_S=${EXPRS_S:-30} EXPRS_AIRS=${EXPRS_AIRS:-ConnectionNew Intermediates Medium Tiny} EXPRS_REPS=3 \
  bash "$here/exprs_round.sh" "${OUT%/launch}/exprs"        # OUT/exprs/summary.txt, exprs-compare.md
echo "$(el) h15 done" | tee -a "$S"
