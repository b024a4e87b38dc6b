# Sourced by the GPU round scripts (gpu_round.sh, wave_round.sh, check_round.sh) after OUT is set:
# the output dir, an elapsed-time stamp `el`, doit from a carried wheel (.whl/) when the image lacks
# it, this tree on PYTHONPATH, and the summary file S opened with the device, nvcc and core count.
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
