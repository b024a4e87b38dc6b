#!/usr/bin/env bash
# Cold-build wall and CPU of one or more trees of exps-codegen on the same keys, one after the
# other. Usage:
#   bash bench/build_cost.sh OUT_DIR TREE [TREE...] -- KEY [KEY...]
# e.g. bench/build_cost.sh /tmp/cost /tmp/before "$PWD" -- provingkey-sample ../shared/pk/*/provingKey
# Each build: a copy of the key, an empty object cache and build root, arch 90, `python3 -m
# codegen.cli build`; prints per tree: wall and CPU (user + sys) summed over the keys.
set -euo pipefail
out=$1; shift
trees=(); while [ "$1" != "--" ]; do trees+=("$(realpath "$1")"); shift; done; shift
keys=(); for k in "$@"; do keys+=("$(realpath "$k")"); done
mkdir -p "$out"
for t in "${trees[@]}"; do
  tag=$(echo "$t" | tr '/' '_'); w="$out/$tag"; rm -rf "$w"; mkdir -p "$w"
  for k in "${keys[@]}"; do
    name=$(echo "$k" | tr '/' '_'); cp -r "$k" "$w/key$name"
    (cd "$t" && PYTHONPATH="$t" EXPS_CACHE_DIR="$w/cache" EXPS_BUILD_ROOT="$w/builds" \
      /usr/bin/time -a -o "$w/time.log" -f "%e %U %S" python3 -m codegen.cli build "$w/key$name" --arch 90 \
      > "$w/out$name.log" 2>&1)
  done
  awk -v t="$t" '{w+=$1; c+=$2+$3} END {printf "%s: wall %.1f s, CPU %.1f s\n", t, w, c}' "$w/time.log"
  # each key's own line (time.log is in key order)
  paste -d' ' <(printf '%s\n' "${keys[@]}") "$w/time.log" | awk '{printf "  %s: wall %.1f s, CPU %.1f s\n", $1, $2, $3+$4}'
done
