#!/usr/bin/env bash
# Nsight Compute of small single Q kernels (issue #14): where does a 16-140-op kernel at 25-47% of
# the copy floor lose its time? Builds the keys holding AIRS (default U8Air Tiny Lookup0), then one
# profiled launch of each AIR's Q kernel (bench/run.py, one rep, no warm-up, no interpreter
# shared-memory variant) with the speed-of-light, memory, occupancy, warp-state and scheduler
# sections. Usage: bash bench/ncu_small.sh OUT   (writes OUT/ncu-<AIR>.txt)
# NCU_PIPES=1: instead of the sections, the metrics that say which limit binds (issue active, each
# integer pipe's cycles and instructions against its peak, DRAM, occupancy, the stall reasons).
set -uo pipefail
OUT=${1:?usage: ncu_small.sh OUT}
. "$(dirname "$0")/round_env.sh"
keys=(${KEYS:-provingkey-sample .pk/fibonacci-square/provingKey .pk/lookup/provingKey})
i=0
for pk in "${keys[@]}"; do
  d=/tmp/ncu/$i; rm -rf "$d"; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
  timeout 150 python3 -m codegen.cli build "$d/pk" --arch 90 -j 4 --build-dir "$d/b" > "$d/log" 2>&1 || echo "BUILD FAILED $pk" | tee -a "$S" &
  i=$(( i + 1 ))
done
wait
echo "$(el) built $(find /tmp/ncu -name '*.exps.so' | wc -l) .so" | tee -a "$S"
for air in ${AIRS:-U8Air Tiny Lookup0}; do
  args=(); for d in /tmp/ncu/[0-9]*; do args+=(--pk "$d/pk" --build-dir "$d/b"); done
  what=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats
        --section SchedulerStats --section LaunchStats)
  [ -n "${NCU_PIPES:-}" ] && what=(--metrics "gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
regex:sm__pipe_(alu|fma|fmaheavy|fmalite)_cycles_active\.avg\.pct_of_peak_sustained_active,\
regex:sm__inst_executed_pipe_(alu|fma|fmaheavy|fmalite)\.avg\.pct_of_peak_sustained_active,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,regex:smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio")
  timeout 120 ncu --clock-control none "${what[@]}" -k regex:"_q_c0_k" -c 1 \
    python3 bench/run.py "${args[@]}" --air "$air" --rows 22 --reps 1 --warmup 0 --no-smem --oracle-rows 0 \
    --out /tmp/ncu/out-$air > "$OUT/ncu-$air.txt" 2>&1
  echo "$(el) $air: $(grep -E 'Memory Throughput|DRAM Throughput|Duration|gpu__time_duration|issue_active|pipe_fmaheavy_cycles|pipe_alu_cycles' "$OUT/ncu-$air.txt" | head -5 | tr -s ' ' | tr '\n' ';')" | tee -a "$S"
done
