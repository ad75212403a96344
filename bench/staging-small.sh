# shellcheck shell=sh
# bench/staging.py's small files: $2 files over 10 subfolders of folder $1, 1-8 KiB each; made
# once (a marker file beside the folder says the set is complete), then read into the page cache.
set -e
n=$2
if [ ! -f "$1.done-$n" ]; then
  rm -rf "$1"
  i=0
  while [ $i -lt "$n" ]; do
    d="$1/part-$((i % 10))"; mkdir -p "$d"
    head -c $(((i % 8 + 1) * 1024)) /dev/urandom > "$d/file-$i.json"
    i=$((i+1))
  done
  : > "$1.done-$n"
fi
cat "$1"/*/* > /dev/null
