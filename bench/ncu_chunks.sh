#!/usr/bin/env bash
# Nsight Compute of every chunk kernel of one chunked Q (issue #13): where does the sample's Large
# (57 chunk kernels of 48-180 registers, 436 G base mults/s against the 821 G of gl3_mul's register
# loop) lose its time? Builds the key holding AIR (default Large, from KEY, default the sample), then
# profiles the first wave of one exps_launch (bench/run.py, one rep, no warm-up; every chunk kernel
# once, `-c` = the AIR's chunk count): first durations alone (one pass, caches as the sequence left
# them), then registers, achieved occupancy, issue-slot and DRAM / L2 throughput, instructions,
# local-memory traffic and warp stall reasons (replayed, caches flushed), as CSV.
# Usage: bash bench/ncu_chunks.sh OUT   (writes OUT/ncu-chunks-<AIR>-{time,counters}.csv, OUT/report-<AIR>.json)
set -uo pipefail
OUT=${1:?usage: ncu_chunks.sh OUT}
. "$(dirname "$0")/round_env.sh"
air=${AIR:-Large}; pk=${KEY:-provingkey-sample}
d=/tmp/ncuc; rm -rf "$d"; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
timeout "${BUILD_S:-150}" python3 -m codegen.cli build "$d/pk" --arch 90 -j 8 --build-dir "$d/b" > "$d/log" 2>&1 \
  || { echo "BUILD FAILED $pk" | tee -a "$S"; tail -5 "$d/log"; exit 1; }
cp "$d/b/report.json" "$OUT/report-$air.json" 2>/dev/null
n=$(python3 -c "import json,sys; r=json.load(open('$d/b/report.json')); print(max(k.get('chunks') or 1 for k in r.get('kernels', [])))" 2>/dev/null || echo 64)
echo "$(el) built; profiling $n chunk kernels of $air" | tee -a "$S"
metrics=gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
prof() {   # prof TAG NCU-ARGS...: one profiled exps_launch (inputs like the prover's: no fallback rows)
  local tag=$1; shift
  BENCH_INPUTS=uniform timeout "${NCU_S:-300}" ncu --clock-control none --csv "$@" -k regex:"_q_c[0-9]+_k" -c "$n" \
    python3 bench/run.py --pk "$d/pk" --build-dir "$d/b" --air "$air" --rows 22 --reps 1 --warmup 0 --no-smem \
    --oracle-rows 0 --out "$d/out" > "$OUT/ncu-chunks-$air-$tag.csv" 2> "$OUT/ncu-chunks-$air-$tag.err"
  echo "$(el) $air $tag: $(grep -c '_q_c' "$OUT/ncu-chunks-$air-$tag.csv") metric rows" | tee -a "$S"
}
# 1. duration only (one pass: no replay, so no cache flush; each chunk sees the L2 its predecessor left)
prof time --cache-control none --metrics gpu__time_duration.sum
# 2. the counters above and the warp stall reasons (replayed passes, caches flushed before each)
prof counters --metrics "$metrics" --section WarpStateStats
