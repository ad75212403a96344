# shellcheck shell=sh

set -e
dest=$1; shift
missing=; for d in "$@"; do [ -d "$d" ] || { echo "not there: $d"; missing=1; }; done
[ -z "$missing" ] || exit 3
stamp=$(for d in "$@"; do
  [ -d "$d" ] && (cd "$d" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
done | sha256sum | cut -c1-32)
mkdir -p "$dest"
for d in "$@"; do cp -a "$d/." "$dest/"; done
printf '%s\n' "$stamp" > "$dest/.gpunode-overlay.tmp"
mv -f "$dest/.gpunode-overlay.tmp" "$dest/.gpunode-overlay"
