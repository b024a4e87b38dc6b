#!/usr/bin/env bash
# One GPU measurement round, one command (issues #11, #13), on the GPU machine, repository root:
#   1. bench/fieldops.py: device field ops vs the portable forms vs the numpy oracle (2^24 pairs per
#      op, every edge pair), and the register-only micro-benchmark before (v010) vs after;
#   2. every key built twice, concurrently: "before" by the snapshot in .old/ (git archive of the
#      commit before the change), "after" by this tree (autotune on in both);
#   3. bench/run.py on the after build with --before: same inputs, same run, q compared word for word
#      (after == before == interpreter on all NExt rows, after == oracle at 2^10);
#   4. exps-codegen gpucheck on the after build (Q and every covered expression vs the oracle).
# Usage: bash bench/gpu_round.sh OUT [PK ...]   (default: provingkey-sample and .pk/*/provingKey)
# Stage limits (s): FIELDOPS_S=150 BUILD_S=200 BENCH_S=220 GPUCHECK_S=120; results in OUT (8 files).
set -uo pipefail
OUT=${1:?usage: gpu_round.sh OUT [PK ...]}; shift
mkdir -p "$OUT"
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
S="$OUT/summary.txt"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  nvcc --version | tail -2; nproc; } | tee "$S"

keys=("$@"); [ ${#keys[@]} -gt 0 ] || keys=(provingkey-sample .pk/*/provingKey)

# 1. field ops
echo "$(el) fieldops" | tee -a "$S"
timeout "${FIELDOPS_S:-150}" python3 bench/fieldops.py --out "$OUT" --build-dir /tmp/fieldops 2>&1 | tee -a "$S" | tail -25

# 2. builds
echo "$(el) builds" | tee -a "$S"
rm -rf /tmp/before /tmp/after /tmp/bb /tmp/ab
pks_after=(); pks_before=(); bd_after=(); bd_before=()
for pk in "${keys[@]}"; do
  rel=${pk#.pk/}                                   # connection/provingKey or provingkey-sample
  mkdir -p "/tmp/after/$(dirname "$rel")" "/tmp/before/$(dirname "$rel")"
  cp -r "$pk" "/tmp/after/$rel"; cp -r "$pk" "/tmp/before/$rel"
  find "/tmp/after/$rel" "/tmp/before/$rel" -name '*.exps.so' -delete
  tag=$(echo "$rel" | tr '/.' '__')
  pks_after+=("/tmp/after/$rel"); pks_before+=("/tmp/before/$rel")
  bd_after+=("/tmp/ab/$tag"); bd_before+=("/tmp/bb/$tag")
done
build_one() {  # codegen-root cache-dir deadline pk build-dir log
  local root=$1 cache=$2 deadline=$3 pk=$4 bd=$5 log=$6 t=$(date +%s)
  local left=$(( deadline - $(date +%s) ))
  (cd "$root" && EXPS_CACHE_DIR=$cache PYTHONPATH="$root:${PYTHONPATH}" timeout $left python3 -m codegen.cli \
    build "$pk" --arch 90 -j 4 --build-dir "$bd") > "$log" 2>&1 || { echo "BUILD FAILED ($root) $pk"; tail -5 "$log"; }
  echo "build ($root) $pk: $(( $(date +%s) - t )) s"
}
dl=$(( $(date +%s) + ${BUILD_S:-200} ))
for i in "${!pks_after[@]}"; do     # every key, both versions, at once (16 cores)
  build_one "$PWD/.old" /tmp/cache-before $dl "${pks_before[$i]}" "${bd_before[$i]}" /tmp/bb_$i.log > /tmp/bbr_$i.log &
  build_one "$PWD" /tmp/cache-after $dl "${pks_after[$i]}" "${bd_after[$i]}" /tmp/ab_$i.log > /tmp/abr_$i.log &
done
wait
cat /tmp/bbr_*.log > /tmp/build-before.log; cat /tmp/abr_*.log > /tmp/build-after.log
{ cat /tmp/build-before.log /tmp/build-after.log; for f in /tmp/ab_*.log; do echo "== $f"; tail -n 70 "$f"; done; } > "$OUT/build.log"
grep -h "build (" "$OUT/build.log" | tee -a "$S" | grep -c . ; grep -h FAILED "$OUT/build.log" | tee -a "$S"
echo "$(el) placed: after $(find /tmp/after -name '*.exps.so' | wc -l), before $(find /tmp/before -name '*.exps.so' | wc -l)" | tee -a "$S"

# 3. before vs after (and the interpreter), NExt = 2^22
echo "$(el) bench" | tee -a "$S"
args=()
for i in "${!pks_after[@]}"; do
  args+=(--pk "${pks_after[$i]}" --build-dir "${bd_after[$i]}" --before "${pks_before[$i]}" --before-build-dir "${bd_before[$i]}")
done
timeout "${BENCH_S:-220}" python3 bench/run.py "${args[@]}" --rows 22 --reps 10 --no-smem --out "$OUT" \
  --budget-s $(( ${BENCH_S:-220} - 30 )) 2>&1 | tee -a "$S" | tail -60

# 4. gpucheck of the after build
echo "$(el) gpucheck" | tee -a "$S"
end=$(( $(date +%s) + ${GPUCHECK_S:-120} ))
for i in "${!pks_after[@]}"; do
  left=$(( end - $(date +%s) )); [ $left -gt 5 ] || { echo "gpucheck: time up before ${pks_after[$i]}" | tee -a "$S"; break; }
  timeout $left python3 -m codegen.cli gpucheck "${pks_after[$i]}" --arch 90 --build-dir "${bd_after[$i]}" \
    >> "$OUT/gpucheck.log" 2>&1
  tail -1 "$OUT/gpucheck.log" | tee -a "$S"
done
echo "$(el) done" | tee -a "$S"
