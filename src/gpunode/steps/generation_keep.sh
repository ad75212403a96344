# shellcheck shell=sh
# Records the live files as a generation: $1 the generations folder, $2 its name, $3 its meta (JSON),
# then the files. Made under a temporary name and renamed, so a cut run leaves no half generation;
# `current` is written last. `rolled` (servers replaced since the last record) starts empty again.
root=$1 name=$2 meta=$3; shift 3
tmp="$root/.tmp-$name"
rm -rf "$tmp" && mkdir -p "$tmp/files" || exit 1
: > "$tmp/files.list"
for f; do
  [ -f "$f" ] || continue
  case $f in *.secrets.*) continue ;; esac  # keys stay only in their 0600 files: a generation keeps their path
  mkdir -p "$tmp/files${f%/*}" && cp -p "$f" "$tmp/files$f" || exit 1
  printf '%s\n' "$f" >> "$tmp/files.list"
done
printf '%s\n' "$meta" > "$tmp/meta"
rm -rf "${root:?}/$name" && mv "$tmp" "$root/$name" || exit 1
printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" >> "$root/log"
printf '%s\n' "$name" > "$root/current.tmp" && mv "$root/current.tmp" "$root/current" || exit 1
: > "$root/rolled"
sync
