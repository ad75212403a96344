# shellcheck shell=sh
set -e
d=$(dirname "$1"); mkdir -p "$d"
t="$d/.gpunode.$$.link"
ln -sfn "$2" "$t"
mv -Tf "$t" "$1"
