#!/usr/bin/env bash
# The GPU round: what a change needs checked and measured on the GPU machine, in one script.
# Run at the repository root there, with .pk/ = a copy of ../shared/pk, doit as a wheel in .whl/
# when the image lacks it, and (to compare) .old/ = `git archive <commit> codegen templates
# pyproject.toml` of the tree to compare against; all three git-ignored, carried to the machine.
#
#   bash bench/gpu_round.sh OUT [PHASE ...]          (default phases: build gpucheck q)
#
#   build     every key built by this tree into $W/after/<i>, and by .old/ into $W/before/<i> where
#             it matches BEFORE_RE (default: every key; no .old/, no before side), all at once, each
#             side with its own object cache and autotune; CHUNK=N builds both at --chunk N
#   gpucheck  `exps-codegen gpucheck` of every after build: Q with ample and tight scratch and every
#             covered expression in every store mode against the numpy oracle, GPUCHECK_P at once
#   q         bench/run.py on the AIRs named in AIRS (default: every AIR): after against before
#             (same inputs, interleaved) and the interpreter, q compared word for word on every row
#   exprs     bench/exprs.py on both sides (same seed), then bench/exprs_compare.py
#   jit       gpucheck of every after build under CUDA_FORCE_PTX_JIT=1: the driver compiles the
#             embedded PTX, as on a GPU newer than the build's arch
#   exact     every key built with -DEXPS_FORCE_EXACT (every Q row through its exact program, the
#             value path's fallback) into $W/exact/<i> and gpucheck'ed
#   fieldops  bench/fieldops.py: the device field ops against the portable forms and the oracle,
#             and their register-only rates
#   sweep     bench/sweep.py --waves WAVES: every AIR of >= MIN_OPS Q ops at every chunking up to
#             MAX_CHUNK ops, timed at each wave size (the data bench/fit_cost.py refits on)
#
# Keys: KEYS (default: .pk/*/provingKey provingkey-sample), plus SYNTH_OPS="3000 8000 ..." synthetic
# keys of that many Q ops (`python3 -m codegen.sample.synth --large-ops N`; e.g. SYNTH_OPS=100000
# KEYS=" " for the 100,000-op Q). Inputs: BENCH_INPUTS=uniform unless set (uniform field elements,
# as the prover's extended-domain columns are; the benchmarks' default mix sends most warps down the
# value path's exact fallback). Seconds per phase: BUILD_S=200 GPUCHECK_S=120 BENCH_S=240
# EXPRS_S=240 (each side) JIT_S=150 EXACT_S=240 FIELDOPS_S=150 SWEEP_S=330; REPS=5 timed runs.
# A later call on the same warm machine runs further phases on the builds an earlier call left in
# $W (ROUND_TMP, default /tmp/round). Results: OUT/summary.txt (every phase's last lines),
# gpucheck*.log, q/bench.{json,md,png}, exprs-{after,before}/, exprs-compare.md, fieldops/, sweep/.
set -uo pipefail
OUT=${1:?usage: gpu_round.sh OUT [build gpucheck q exprs jit exact fieldops sweep]}; shift
phases=("$@"); [ ${#phases[@]} -gt 0 ] || phases=(build gpucheck q)
W=${ROUND_TMP:-/tmp/round}
OLD=${OLD:-.old}
export BENCH_INPUTS=${BENCH_INPUTS:-uniform}
mkdir -p "$OUT" "$W"
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
S="$OUT/summary.txt"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1; echo "cores: $(nproc); phases: ${phases[*]}; BENCH_INPUTS=$BENCH_INPUTS"; } | tee -a "$S"

keys=(); for k in ${KEYS-.pk/*/provingKey provingkey-sample}; do [ -d "$k" ] && keys+=("$k"); done
for n in ${SYNTH_OPS:-}; do
  [ -d "$W/synth/k$n" ] || python3 -m codegen.sample.synth "$W/synth/k$n" --large-ops "$n" > /dev/null
  keys+=("$W/synth/k$n")
done
n_keys=${#keys[@]}
has_before() { [ -d "$OLD" ] && [[ ${keys[$1]} =~ ${BEFORE_RE:-.} ]]; }

# build_all SIDE... : key i into $W/<side>/<i>/{pk,b,log}, every side and key at once, each with
# -j (cores / builds, at least 2), until BUILD_S have passed. Side "exact" is this tree with
# every Q row through its exact program (NVCC_APPEND_FLAGS: part of the object cache's key).
build_all() {
  local dl=$(( $(date +%s) + ${BUILD_S:-200} )) side i root d flags builds=0 j
  for side in "$@"; do for i in "${!keys[@]}"; do
    [ "$side" != before ] || has_before "$i" && builds=$(( builds + 1 )); done; done
  j=$(( $(nproc) / (builds > 0 ? builds : 1) )); [ "$j" -ge 2 ] || j=2
  for side in "$@"; do
    for i in "${!keys[@]}"; do
      [ "$side" != before ] || has_before "$i" || continue
      d=$W/$side/$i; rm -rf "$d"; mkdir -p "$d"; cp -r "${keys[$i]}" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
      root=$PWD; [ "$side" = before ] && root=$(realpath "$OLD")
      flags=; [ "$side" = exact ] && flags=-DEXPS_FORCE_EXACT
      (cd "$root" && NVCC_APPEND_FLAGS=$flags EXPS_CACHE_DIR=$W/cache-$side PYTHONPATH="$root:$PYTHONPATH" \
        timeout $(( dl - $(date +%s) )) python3 -m codegen.cli build "$d/pk" --arch 90 -j "$j" --build-dir "$d/b" \
        ${CHUNK:+--chunk "$CHUNK"} > "$d/log" 2>&1 || echo "BUILD FAILED $side ${keys[$i]}: $(tail -1 "$d/log")" | tee -a "$S") &
    done
  done
  wait
  for side in "$@"; do
    echo "$(el) built $side: $(find "$W/$side" -name '*.exps.so' 2>/dev/null | wc -l) .so" | tee -a "$S"
  done
}

# gpucheck SIDE LOG SECONDS [ENV=VALUE...]: gpucheck of $W/<side>/<i> for every key, GPUCHECK_P
# (default 6) at once (their time is the numpy oracle's, one core each); each key's log appended
# to LOG in key order, its last line to the summary.
gpucheck() {
  local side=$1 log=$2 end=$(( $(date +%s) + $3 )) i left; shift 3
  : > "$log"
  for i in "${!keys[@]}"; do
    [ -d "$W/$side/$i/b" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "${GPUCHECK_P:-6}" ]; do sleep 0.2; done
    left=$(( end - $(date +%s) )); [ $left -gt 3 ] || { echo "gpucheck $side: time up at key $i" | tee -a "$S"; break; }
    env "$@" timeout $left python3 -m codegen.cli gpucheck "$W/$side/$i/pk" --build-dir "$W/$side/$i/b" \
      > "$log.$i" 2>&1 &
  done
  wait
  for i in "${!keys[@]}"; do
    [ -f "$log.$i" ] || continue
    cat "$log.$i" >> "$log"; rm -f "$log.$i"
    echo "gpucheck $side ${keys[$i]}: $(tail -1 "$log")" | tee -a "$S"
  done
}

for phase in "${phases[@]}"; do
  echo "$(el) $phase" | tee -a "$S"
  case $phase in
    build)
      if [ -d "$OLD" ]; then build_all after before; else build_all after; fi ;;
    gpucheck)
      gpucheck after "$OUT/gpucheck.log" "${GPUCHECK_S:-120}" ;;
    jit)
      gpucheck after "$OUT/gpucheck-jit.log" "${JIT_S:-150}" CUDA_FORCE_PTX_JIT=1 ;;
    exact)
      BUILD_S=${EXACT_S:-240} build_all exact
      gpucheck exact "$OUT/gpucheck-exact.log" "${EXACT_S:-240}" ;;
    q)
      with=(); without=(); before=()
      for i in "${!keys[@]}"; do       # run.py matches --before to --pk by order: those keys first
        [ -d "$W/after/$i/b" ] || continue
        if [ -d "$W/before/$i/b" ]; then
          with+=(--pk "$W/after/$i/pk" --build-dir "$W/after/$i/b")
          before+=(--before "$W/before/$i/pk" --before-build-dir "$W/before/$i/b")
        else
          without+=(--pk "$W/after/$i/pk" --build-dir "$W/after/$i/b")
        fi
      done
      airs=(); for a in ${AIRS:-}; do airs+=(--air "$a"); done
      timeout "${BENCH_S:-240}" python3 bench/run.py "${with[@]}" "${without[@]}" "${before[@]}" "${airs[@]}" \
        --rows 22 --reps "${REPS:-5}" --warmup 2 --no-smem --oracle-rows 10 --out "$OUT/q" \
        --budget-s $(( ${BENCH_S:-240} - 15 )) > "$OUT/q.log" 2>&1
      echo "rc $?" | tee -a "$S"; grep -E '^\||AIRs' "$OUT/q.log" | tail -60 | tee -a "$S" ;;
    exprs)
      airs=(); for a in ${AIRS:-}; do airs+=(--air "$a"); done
      for side in after before; do
        pks=(); for d in "$W/$side"/*/pk; do [ -d "$d" ] && pks+=(--pk "$d"); done
        [ ${#pks[@]} -gt 0 ] || continue
        timeout $(( ${EXPRS_S:-240} + 30 )) python3 bench/exprs.py "${pks[@]}" "${airs[@]}" --rows 22 \
          --reps "${REPS:-5}" --warmup 2 --seed 1 --oracle-rows 10 --out "$OUT/exprs-$side" \
          --budget-s "${EXPRS_S:-240}" > "$OUT/exprs-$side.log" 2>&1
        echo "exprs $side: rc $? $(tail -1 "$OUT/exprs-$side.log")" | tee -a "$S"
      done
      if [ -f "$OUT/exprs-before/exprs.json" ]; then
        python3 bench/exprs_compare.py "$OUT/exprs-after/exprs.json" "$OUT/exprs-before/exprs.json" \
          > "$OUT/exprs-compare.md" && tail -1 "$OUT/exprs-compare.md" | tee -a "$S"
      fi ;;
    fieldops)
      timeout "${FIELDOPS_S:-150}" python3 bench/fieldops.py --out "$OUT/fieldops" --build-dir "$W/fieldops" \
        > "$OUT/fieldops.log" 2>&1
      echo "rc $?" | tee -a "$S"; tail -25 "$OUT/fieldops.log" | tee -a "$S" ;;
    sweep)
      pks=(); for k in "${keys[@]}"; do pks+=(--pk "$k"); done
      timeout "${SWEEP_S:-330}" python3 bench/sweep.py "${pks[@]}" --rows 22 --reps "${REPS:-5}" \
        --min-ops "${MIN_OPS:-60}" --max-chunk "${MAX_CHUNK:-192}" --waves "${WAVES:-2048}" --out "$OUT/sweep" \
        --budget-s $(( ${SWEEP_S:-330} - 20 )) > "$OUT/sweep.log" 2>&1
      echo "rc $?" | tee -a "$S"; tail -30 "$OUT/sweep.log" | tee -a "$S"
      rm -f "$OUT/sweep/sweep_partial.txt" ;;
    *)
      echo "unknown phase $phase (build gpucheck q exprs jit exact fieldops sweep)" | tee -a "$S"; exit 2 ;;
  esac
done
echo "$(el) done" | tee -a "$S"
