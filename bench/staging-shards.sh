# shellcheck shell=sh
# bench/staging.py's model: $2 shards of $3 MiB of random bytes in folder $1, made once, then
# read once so that every copy starts with them in the page cache.
set -e
mkdir -p "$1"
i=0
while [ $i -lt "$2" ]; do
  f="$1/model-$i.safetensors"
  [ -f "$f" ] || head -c $(($3 * 1048576)) /dev/urandom > "$f"
  i=$((i+1))
done
cat "$1"/* > /dev/null
