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

# For the A/B rounds that build variants of this tree (inv_rows_round.sh, minblocks_round.sh):
# variant_tree T: a copy of the package and templates at T/tree, for the round to rewrite.
variant_tree() { rm -rf "$1"; mkdir -p "$1/tree"; cp -r codegen templates pyproject.toml "$1/tree/"; }
# build_variant T DEADLINE TAG KEY...: key i copied to T/<i>/pk (no .so) and built by T/tree into
# T/<i>/b (cache T/cache) until DEADLINE (epoch s), in the background: the caller waits.
build_variant() {
  local t=$1 dl=$2 tag=$3 i=0 pk d; shift 3
  for pk in "$@"; do
    d=$t/$i; mkdir -p "$d"; cp -r "$pk" "$d/pk"; find "$d/pk" -name '*.exps.so' -delete
    (cd "$t/tree" && EXPS_CACHE_DIR=$t/cache PYTHONPATH="$t/tree:$PYTHONPATH" timeout $(( dl - $(date +%s) )) \
      python3 -m codegen.cli build "$d/pk" --arch 90 -j 2 --build-dir "$d/b" > "$d/log" 2>&1 || echo "BUILD FAILED $tag $pk") &
    i=$(( i + 1 ))
  done
}

# gpucheck_keys ROOT N LOG SECONDS: `exps-codegen gpucheck` of ROOT/<i>/pk (build dir ROOT/<i>/b) for
# i < N, GPUCHECK_P (default 6) at once (their time is the numpy oracle's, one core each), until
# SECONDS have passed; each key's log appended to LOG in key order, its last line to the summary.
gpucheck_keys() {
  local root=$1 n=$2 log=$3 end=$(( $(date +%s) + $4 )) j left
  for j in $(seq 0 $(( n - 1 ))); do
    while [ "$(jobs -rp | wc -l)" -ge "${GPUCHECK_P:-6}" ]; do sleep 0.2; done
    left=$(( end - $(date +%s) )); [ $left -gt 3 ] || { echo "gpucheck: time up at key $j" | tee -a "$S"; break; }
    timeout $left python3 -m codegen.cli gpucheck "$root/$j/pk" --arch 90 --build-dir "$root/$j/b" > "$log.$j" 2>&1 &
  done
  wait
  for j in $(seq 0 $(( n - 1 ))); do
    [ -f "$log.$j" ] || continue
    cat "$log.$j" >> "$log"; rm -f "$log.$j"
    tail -1 "$log" | tee -a "$S"
  done
}
