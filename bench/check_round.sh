#!/usr/bin/env bash
# A short GPU round for a change of the chunked plans (issue #13): every key built after (this
# tree) and the keys matching BEFORE_RE (a bash regex) also before (.old/, a `git archive` of the
# commit before), all at once, `exps-codegen gpucheck` of
# every after build first (bit-identity on the GPU; GPUCHECK_P keys at once, default 6), then bench/run.py before vs after, same run,
# on the AIRs named in AIRS (default: the chunked ones), ample and the prover's scratch.
# Usage: bash bench/check_round.sh OUT    Limits (s): BUILD_S=100 GPUCHECK_S=100 BENCH_S=60; REPS=5 timed runs.
set -uo pipefail
OUT=${1:?usage: check_round.sh OUT}
. "$(dirname "$0")/round_env.sh"
keys=(.pk/*/provingKey provingkey-sample)
dl=$(( $(date +%s) + ${BUILD_S:-100} ))
a_args=(); b_args=(); c_args=(); i=0
for pk in "${keys[@]}"; do
  sides=after; re=${BEFORE_RE:-provingkey-sample|connection|intermediate_sums}
  [[ $pk =~ $re ]] && sides="after before"
  for side in $sides; do
    d=/tmp/$side/$i; rm -rf "$d"; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
    root=$PWD; [ $side = before ] && root=$PWD/.old
    (cd "$root" && EXPS_CACHE_DIR=/tmp/cache-$side PYTHONPATH="$root:$PYTHONPATH" timeout $(( dl - $(date +%s) )) \
      python3 -m codegen.cli build "$d/pk" --arch 90 -j 2 --build-dir "$d/b" > "$d/log" 2>&1 || echo "BUILD FAILED $side $pk") &
  done
  if [ "$sides" = after ]; then      # run.py matches --before to --pk by order: those keys first
    c_args+=(--pk /tmp/after/$i/pk --build-dir /tmp/after/$i/b)
  else
    a_args+=(--pk /tmp/after/$i/pk --build-dir /tmp/after/$i/b)
    b_args+=(--before /tmp/before/$i/pk --before-build-dir /tmp/before/$i/b)
  fi
  i=$(( i + 1 ))
done
wait
echo "$(el) built: after $(find /tmp/after -name '*.exps.so' | wc -l), before $(find /tmp/before -name '*.exps.so' | wc -l)" | tee -a "$S"
gpucheck_keys /tmp/after "$i" "$OUT/gpucheck.log" "${GPUCHECK_S:-100}"
echo "$(el) bench" | tee -a "$S"
airs=(); for a in ${AIRS:-Medium Large Shared ConnectionNew Intermediates SpecifiedRanges RangeCheck4}; do airs+=(--air "$a"); done
timeout "${BENCH_S:-60}" python3 bench/run.py "${a_args[@]}" "${c_args[@]}" "${b_args[@]}" "${airs[@]}" --rows 22 --reps "${REPS:-5}" --warmup 2 --no-smem \
  --oracle-rows 10 --out "$OUT" --budget-s $(( ${BENCH_S:-60} - 10 )) 2>&1 | grep -E '^\||AIRs, before' | tee -a "$S"
echo "$(el) done" | tee -a "$S"
