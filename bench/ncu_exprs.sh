#!/usr/bin/env bash
# Where the trace-domain expression kernels lose their time (issue #14): build KEYS, time every
# covered expression launch of them (bench/exprs.py, all AIRs: % of the floor per AIR), then one
# Nsight Compute pass over the first NCU_C expression kernels of each AIR in AIRS (speed of light,
# memory, occupancy, warp states, scheduler, launch), and optionally (SWEEP_AIR) a chunk sweep of
# that AIR's Q (bench/sweep.py at SWEEP_CHUNKS). Usage: bash bench/ncu_exprs.sh OUT
# Limits (s): BUILD_S=150 EXPRS_S=150 NCU_S=150 SWEEP_S=0 (0: no sweep).
set -uo pipefail
OUT=${1:?usage: ncu_exprs.sh OUT}
. "$(dirname "$0")/round_env.sh"
export BENCH_INPUTS=${BENCH_INPUTS:-uniform}
keys=(${KEYS:-provingkey-sample .pk/lookup/provingKey .pk/connection/provingKey .pk/intermediate_sums/provingKey})
i=0
for pk in "${keys[@]}"; do
  d=/tmp/ncx/$i; rm -rf "$d"; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
  timeout ${BUILD_S:-150} python3 -m codegen.cli build "$d/pk" --arch 90 -j 4 --build-dir "$d/b" > "$d/log" 2>&1 \
    || echo "BUILD FAILED $pk" | tee -a "$S" &
  i=$(( i + 1 ))
done
if [ "${SWEEP_S:-0}" -gt 0 ]; then     # the sweep's builds beside the keys' (16 cores)
  timeout $(( SWEEP_S + 200 )) python3 bench/sweep.py --pk provingkey-sample --air "${SWEEP_AIR:-Large}" \
    --chunks "${SWEEP_CHUNKS:-48,64,96}" --rows 22 --reps 5 --out "$OUT/sweep" --budget-s "$SWEEP_S" \
    > "$OUT/sweep.log" 2>&1 &
  sweep_pid=$!
fi
while [ "$(jobs -rp | wc -l)" -gt $([ -n "${sweep_pid:-}" ] && echo 1 || echo 0) ]; do sleep 1; done
echo "$(el) built $(find /tmp/ncx -name '*.exps.so' | wc -l) .so" | tee -a "$S"
[ -n "${sweep_pid:-}" ] && { wait "$sweep_pid"; echo "$(el) sweep: $(tail -3 "$OUT/sweep.log" | tr '\n' ' ')" | tee -a "$S"; }
pks=(); for d in /tmp/ncx/[0-9]*/pk; do pks+=(--pk "$d"); done
timeout $(( ${EXPRS_S:-150} + 30 )) python3 bench/exprs.py "${pks[@]}" --rows 22 --reps 5 --warmup 2 --seed 1 \
  --oracle-rows 10 --out "$OUT/exprs" --budget-s "${EXPRS_S:-150}" > "$OUT/exprs.log" 2>&1
echo "$(el) exprs: $(tail -1 "$OUT/exprs.log")" | tee -a "$S"
end=$(( $(date +%s) + ${NCU_S:-150} ))
for air in ${AIRS:-Lookup0 Connection1 Intermediates}; do
  left=$(( end - $(date +%s) )); [ $left -gt 5 ] || break
  timeout $left ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    -k regex:"_x_e|x_inv" -c ${NCU_C:-12} python3 bench/exprs.py "${pks[@]}" --air "$air" --rows 22 --reps 1 \
    --warmup 0 --oracle-rows 0 --out "/tmp/ncx/out-$air" > "$OUT/ncu-$air.txt" 2>&1
  echo "$(el) ncu $air: $(grep -c 'Duration' "$OUT/ncu-$air.txt") kernels profiled" | tee -a "$S"
done
echo "$(el) done" | tee -a "$S"
