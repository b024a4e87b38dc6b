#!/usr/bin/env bash
# Cold-build wall and CPU of the issue-#15 synthetic Qs on the GPU machine's cores, this tree
# ("after") and, where SIDES names it, the tree carried in .old ("before"), each key cold in its
# side's own object cache; a side's builds stop at DEADLINE_S seconds from the start (default 560).
#   OUT=$OUT/s SIDES="after before" SIZES="3000 20000 39000 45000" bash bench/synth_cost_round.sh
# $OUT: time-<side>.txt ("<ops> <wall s> <user s> <sys s>" per key), <side>-<ops>.log, summary.txt.
set -uo pipefail
. bench/round_env.sh
SIDES=${SIDES:-after}; SIZES=${SIZES:-3000 20000 39000 45000}; J=${J:-$(nproc)}
end=$(( T0 + ${DEADLINE_S:-560} ))
mkdir -p /tmp/syn
for n in $SIZES; do python3 -m codegen.sample.synth /tmp/syn/k$n --large-ops $n > /dev/null; done
echo "$(el) keys made; -j $J" | tee -a "$S"
for side in $SIDES; do
  root=$PWD; [ "$side" = before ] && root=$PWD/.old
  for n in $SIZES; do
    left=$(( end - $(date +%s) )); [ $left -gt 10 ] || { echo "$(el) time up before $side $n" | tee -a "$S"; break 2; }
    rm -rf /tmp/$side/k$n; mkdir -p /tmp/$side; cp -r /tmp/syn/k$n /tmp/$side/k$n
    (cd "$root" && EXPS_CACHE_DIR=/tmp/cache-$side PYTHONPATH="$root:$PYTHONPATH" /usr/bin/time -a -o "$OUT/time-$side.txt" \
      -f "$n %e %U %S" timeout $left python3 -m codegen.cli build /tmp/$side/k$n --arch 90 -j "$J" \
      --build-dir /tmp/$side/b$n > "$OUT/$side-$n.log" 2>&1) || echo "$(el) $side $n: rc $?" | tee -a "$S"
    echo "$(el) $side $n: $(tail -1 "$OUT/time-$side.txt") | $(grep -E '^[0-9]+ AIRs' "$OUT/$side-$n.log")" | tee -a "$S"
  done
done
