#!/usr/bin/env bash
# SASS instructions per field op, v0.1.0's header vs templates/gen_common.cuh (sm_90), loads, stores
# and address arithmetic excluded. Needs nvcc and cuobjdump (+ nvdisasm; on a machine without them:
# pip download nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm and put their bin/ on PATH).
# Usage: bash bench/sass_count.sh
set -euo pipefail
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
mkdir -p "$d/old"; cp bench/baseline/gen_common_v010.cuh "$d/old/gen_common.cuh"
nvcc -cubin -arch=sm_90 -O3 -I "$d/old" bench/sass_probe.cu -o "$d/old.cubin"
nvcc -cubin -arch=sm_90 -O3 -I templates bench/sass_probe.cu -o "$d/new.cubin"
for f in old new; do
  cuobjdump -sass "$d/$f.cubin" | grep -E "^\s+/\*[0-9a-f]{4}\*/|Function" | grep -v NOP |
    awk -v v=$f '/Function/{n=$3; next} {t[n]++; if ($0 ~ /LDC|S2R|ULDC|LDG|STG|EXIT|BRA|IMAD.WIDE R[0-9]+, R[0-9]+, 0x(8|18)/) o[n]++}
                 END {for (n in t) printf "%s %-7s %4d\n", v, n, t[n] - o[n]}'
done | sort -k2,2 -k1,1r
