#!/usr/bin/env bash
# An EXPS_NVCC wrapper that logs the CPU of every nvcc call: one line per call to
# $NVCC_LOG (default /tmp/nvcc_calls.log), "<user+sys s> <wall s> <flags it added> <nvcc
# arguments>"; device compiles (-fatbin / -cubin) get $NVCC_EXTRA's flags first (e.g.
# NVCC_EXTRA="-Xptxas -Ofc=min").
#   EXPS_NVCC=$PWD/bench/nvcc_log.sh python3 -m codegen.cli build KEY --arch 90
#   python3 bench/nvcc_by_tu.py /tmp/nvcc_calls.log
extra=()
for a in "$@"; do case "$a" in -fatbin|-cubin) read -r -a extra <<< "${NVCC_EXTRA:-}";; esac; done
t=$(mktemp)
s=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$t" nvcc "${extra[@]}" "$@"; rc=$?
e=$(date +%s.%N)
echo "$(awk '{printf "%.2f", $1 + $2}' "$t") $(awk -v s="$s" -v e="$e" 'BEGIN {printf "%.2f", e - s}') ${extra[*]} $*" >> "${NVCC_LOG:-/tmp/nvcc_calls.log}"
rm -f "$t"
exit $rc
