# shellcheck shell=sh

dest=$1; shift
cat "$dest/.gpunode-overlay" 2>/dev/null || echo none
for d in "$@"; do [ -d "$d" ] || echo "@@missing $d"; done
for d in "$@"; do
  [ -d "$d" ] && (cd "$d" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
done | sha256sum | cut -c1-32
