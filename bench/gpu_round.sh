#!/usr/bin/env bash
# One GPU measurement round, one command (issues #11, #13), on the GPU machine, repository root:
#   1. bench/fieldops.py: device field ops vs the portable forms vs the numpy oracle (2^24 pairs per
#      op, every edge pair), and the register-only micro-benchmark before (v010) vs after;
#   2. every key built twice, all at once: "before" by the snapshot in .old/ (`git archive` of the
#      commit before the change), "after" by this tree (autotune on in both);
#   3. bench/run.py on the after build with --before: same inputs, same run, q compared word for word
#      (after == before == interpreter on all NExt rows, after == oracle at 2^10);
#   4. exps-codegen gpucheck on the after build (Q and every covered expression vs the oracle);
#   5. with FIXED_CHUNK=N: steps 2-3 again with `--chunk N` on both sides (the same chunking before
#      and after: the arithmetic and the IR passes without the tuner's choices), into OUT/fixed;
#      FIXED_BEFORE=DIR (default .old) takes that phase's "before" from another snapshot.
# Usage: bash bench/gpu_round.sh OUT [PK ...]   (default: provingkey-sample and .pk/*/provingKey)
# Stage limits (s): FIELDOPS_S=150 (0 = skip) BUILD_S=200 BENCH_S=220 GPUCHECK_S=120 (0 = skip).
# Results in OUT: summary.txt, fieldops.{json,md}, build.log, bench.{json,md,png}, gpucheck.log,
# fixed/bench.{json,md}.
set -uo pipefail
OUT=${1:?usage: gpu_round.sh OUT [PK ...]}; shift
. "$(dirname "$0")/round_env.sh"

keys=("$@"); [ ${#keys[@]} -gt 0 ] || keys=(provingkey-sample .pk/*/provingKey)

# 1. field ops
if [ "${FIELDOPS_S:-150}" -gt 0 ]; then
  echo "$(el) fieldops" | tee -a "$S"
  timeout "${FIELDOPS_S:-150}" python3 bench/fieldops.py --out "$OUT" --build-dir /tmp/fieldops 2>&1 | tee -a "$S" | tail -25
fi

build_one() {  # codegen-root cache-dir deadline pk build-dir log [build args...]
  local root=$1 cache=$2 deadline=$3 pk=$4 bd=$5 log=$6 t=$(date +%s); shift 6
  local left=$(( deadline - $(date +%s) ))
  (cd "$root" && EXPS_CACHE_DIR=$cache PYTHONPATH="$root:${PYTHONPATH}" timeout $left python3 -m codegen.cli \
    build "$pk" --arch 90 -j 4 --build-dir "$bd" "$@") > "$log" 2>&1 || { echo "BUILD FAILED ($root) $pk"; tail -5 "$log"; }
  echo "build ($root) $pk: $(( $(date +%s) - t )) s"
}

# builds + before/after benchmark; $1 = tag (dirs /tmp/{before,after,bb,ab}$tag), $2 = bench out dir,
# $3 = the snapshot that builds "before", rest = extra build args (e.g. --chunk 64)
round() {
  local tag=$1 bout=$2 old=$3; shift 3
  echo "$(el) builds $tag $*" | tee -a "$S"
  rm -rf /tmp/before$tag /tmp/after$tag /tmp/bb$tag /tmp/ab$tag
  pks_after=(); pks_before=(); bd_after=(); bd_before=()
  local pk rel i
  for pk in "${keys[@]}"; do
    rel=${pk#.pk/}                                   # connection/provingKey or provingkey-sample
    mkdir -p "/tmp/after$tag/$(dirname "$rel")" "/tmp/before$tag/$(dirname "$rel")"
    cp -r "$pk" "/tmp/after$tag/$rel"; cp -r "$pk" "/tmp/before$tag/$rel"
    find "/tmp/after$tag/$rel" "/tmp/before$tag/$rel" -name '*.exps.so' -delete
    pks_after+=("/tmp/after$tag/$rel"); pks_before+=("/tmp/before$tag/$rel")
    bd_after+=("/tmp/ab$tag/$(echo "$rel" | tr '/.' '__')"); bd_before+=("/tmp/bb$tag/$(echo "$rel" | tr '/.' '__')")
  done
  local dl=$(( $(date +%s) + ${BUILD_S:-200} ))
  for i in "${!pks_after[@]}"; do     # every key, both versions, at once (16 cores)
    build_one "$PWD/$old" /tmp/cache-before$tag $dl "${pks_before[$i]}" "${bd_before[$i]}" /tmp/bb${tag}_$i.log "$@" > /tmp/bbr${tag}_$i.log &
    build_one "$PWD" /tmp/cache-after $dl "${pks_after[$i]}" "${bd_after[$i]}" /tmp/ab${tag}_$i.log "$@" > /tmp/abr${tag}_$i.log &
  done
  wait
  { echo "== builds $tag $*"; cat /tmp/bbr${tag}_*.log /tmp/abr${tag}_*.log
    for f in /tmp/ab${tag}_*.log; do echo "== $f"; tail -n 70 "$f"; done; } >> "$OUT/build.log"
  grep -h "build (" /tmp/bbr${tag}_*.log /tmp/abr${tag}_*.log | tee -a "$S" | grep -c .
  grep -h FAILED /tmp/bbr${tag}_*.log /tmp/abr${tag}_*.log | tee -a "$S"
  echo "$(el) placed: after $(find /tmp/after$tag -name '*.exps.so' | wc -l), before $(find /tmp/before$tag -name '*.exps.so' | wc -l)" | tee -a "$S"

  echo "$(el) bench $tag" | tee -a "$S"
  local args=()
  for i in "${!pks_after[@]}"; do
    args+=(--pk "${pks_after[$i]}" --build-dir "${bd_after[$i]}" --before "${pks_before[$i]}" --before-build-dir "${bd_before[$i]}")
  done
  mkdir -p "$bout"
  timeout "${BENCH_S:-220}" python3 bench/run.py "${args[@]}" --rows 22 --reps 10 --no-smem --out "$bout" \
    --budget-s $(( ${BENCH_S:-220} - 30 )) 2>&1 | tee -a "$S" | tail -50
}

round "" "$OUT" .old

# 4. gpucheck of the after build
if [ "${GPUCHECK_S:-120}" -gt 0 ]; then
  echo "$(el) gpucheck" | tee -a "$S"
  end=$(( $(date +%s) + ${GPUCHECK_S:-120} ))
  for i in "${!pks_after[@]}"; do
    left=$(( end - $(date +%s) )); [ $left -gt 5 ] || { echo "gpucheck: time up before ${pks_after[$i]}" | tee -a "$S"; break; }
    timeout $left python3 -m codegen.cli gpucheck "${pks_after[$i]}" --arch 90 --build-dir "${bd_after[$i]}" \
      >> "$OUT/gpucheck.log" 2>&1
    tail -1 "$OUT/gpucheck.log" | tee -a "$S"
  done
fi

# 5. the same chunking on both sides
if [ -n "${FIXED_CHUNK:-}" ]; then
  round "_c${FIXED_CHUNK}" "$OUT/fixed" "${FIXED_BEFORE:-.old}" --chunk "${FIXED_CHUNK}"
  rm -f "$OUT/fixed/bench.png"
fi
echo "$(el) done" | tee -a "$S"
