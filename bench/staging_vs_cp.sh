#!/bin/sh
# Staging into /dev/shm with templates/weights/stage-weights.sh against cp, on any Linux
# machine with nothing but a shell (a GPU node, the device machine): no Python, no gpunode.
#
#   sh bench/staging_vs_cp.sh [GIB] [SHARDS] [SMALL_FILES] [ROUNDS]
#
# Makes a source folder on disk (SHARDS files sharing GIB, plus SMALL_FILES of 4 KiB, as a
# tokenizer and config would be), then alternates rounds of `cp -r` and the staging script
# into /dev/shm, and prints each case's ratio cp time / script time from the same run
# (above 1: the script is faster). Cases: the shards, the small files, and the script's
# re-run over a complete copy. bench/staging.py is the same bench through the lab.
set -eu
gib=${1:-4}
shards=${2:-8}
small=${3:-1000}
rounds=${4:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
script=$here/templates/weights/stage-weights.sh
work=${TMPDIR:-/tmp}/gpunode-bench-staging.$$
shm=/dev/shm/gpunode-bench-staging.$$
trap 'rm -rf "$work" "$shm"' EXIT
mkdir -p "$work/big" "$work/small" "$shm"
each=$((gib * 1024 / shards))
i=0
while [ "$i" -lt "$shards" ]; do
  head -c "$((each * 1024 * 1024))" /dev/urandom > "$work/big/model-$i.safetensors"
  i=$((i + 1))
done
i=0
while [ "$i" -lt "$small" ]; do
  head -c 4096 /dev/urandom > "$work/small/f$i.json"
  i=$((i + 1))
done
now() { date +%s.%N; }
took() { # $1: command to time (a function name); prints seconds
  t0=$(now); "$@" > /dev/null; t1=$(now)
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
cp_case() { rm -rf "$shm/c"; cp -r "$src" "$shm/c"; }
script_case() { rm -rf "$shm/s"; sh "$script" "$src" "$shm/s"; }
rerun_case() { sh "$script" "$src" "$shm/s"; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo);" \
  "source on $(df -P "$work" | awk 'NR == 2 { print $1 }'); ${gib} GiB in $shards shards, $small small files"
for case in big small; do
  src=$work/$case
  cp_case; script_case > /dev/null  # warm the page cache for both: each round then reads from memory alike
  : > "$work/times.$case"
  r=0
  while [ "$r" -lt "$rounds" ]; do
    echo "$(took cp_case) $(took script_case) $(took rerun_case)" >> "$work/times.$case"
    r=$((r + 1))
  done
  median() { cut -d' ' -f"$1" "$work/times.$case" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  awk -v c="$case" -v cp="$(median 1)" -v s="$(median 2)" -v re="$(median 3)" -v n="$rounds" 'BEGIN {
    printf "%-6s cp %.2f s, staging %.2f s, re-run %.3f s: ratio %.2f, re-run ratio %.1f (medians of %d)\n",
           c, cp, s, re, cp / s, cp / re, n }'
done
