#!/bin/sh
# Managed by gpunode. Stages a model folder into memory (/dev/shm), resumably.
#
#   stage-weights.sh [-x PATH]... SRC DEST [sha256]
#
# -x leaves out a file of SRC (a path relative to it): another copy of the weights
# that the servers do not load (gpunode's facts/served.py names them).
#
# Each file is copied to NAME.gpunode-part in 256 MiB chunks and renamed only
# when complete, so DEST never holds a half-written file under its real name.
# An interrupted copy resumes from the last whole chunk. Finished files are
# recorded in DEST/.gpunode-progress (name, size, mtime); the manifest
# DEST/.gpunode-manifest is written last, atomically, and is what a re-run and
# the servers' boot unit compare with the source.
set -eu
nl='
'
skip=
while [ "$#" -gt 0 ] && [ "$1" = -x ]; do skip="$skip${2:?-x needs a path}$nl"; shift 2; done
src=${1:?usage: stage-weights.sh [-x PATH]... SRC DEST [sha256]}
dest=${2:?usage: stage-weights.sh [-x PATH]... SRC DEST [sha256]}
verify=${3:-}
bs=4194304
chunk_blocks=64
tab=$(printf '\t')

[ -d "$src" ] || { echo "stage-weights: source $src is not a folder" >&2; exit 2; }
mkdir -p "$dest"
# -L: a link in the source (a Hugging Face cache snapshot is made of them) is copied as its file.
listing=$(cd "$src" && find -L . -type f ! -name '.gpunode-*' -printf '%P\t%s\t%T@\n' |
  SKIP=$skip awk -F'\t' 'BEGIN { n = split(ENVIRON["SKIP"], s, "\n"); for (i = 1; i <= n; i++) out[s[i]] = 1 }
    !($1 in out)' | LC_ALL=C sort)
total=$(printf '%s\n' "$listing" | awk -F'\t' '{s += $2} END {printf "%d", s}')
touch "$dest/.gpunode-progress"
echo "@@total $total"

printf '%s\n' "$listing" > "$dest/.gpunode-listing.tmp"
done_bytes=0
while IFS="$tab" read -r name size mtime; do
  [ -n "$name" ] || continue
  out="$dest/$name"
  if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$size" ] \
     && grep -qxF "$name$tab$size$tab$mtime" "$dest/.gpunode-progress"; then
    done_bytes=$((done_bytes + size))
    echo "@@progress $done_bytes $total $name"
    continue
  fi
  mkdir -p "$(dirname "$out")"
  part="$out.gpunode-part"
  have=0
  [ -f "$part" ] && have=$(stat -c %s "$part")
  have=$((have / bs * bs))
  [ "$have" -le "$size" ] || have=0
  truncate -s "$have" "$part" 2>/dev/null || : > "$part"
  while [ "$have" -lt "$size" ]; do
    dd if="$src/$name" of="$part" bs=$bs skip=$((have / bs)) seek=$((have / bs)) \
       count=$chunk_blocks conv=notrunc status=none
    now=$(stat -c %s "$part")
    [ "$now" -gt "$have" ] || { echo "stage-weights: no progress copying $name (source shrank?)" >&2; exit 3; }
    have=$now
    echo "@@progress $((done_bytes + have)) $total $name"
  done
  if [ "$verify" = sha256 ]; then
    a=$(sha256sum < "$src/$name" | cut -d' ' -f1)
    b=$(sha256sum < "$part" | cut -d' ' -f1)
    [ "$a" = "$b" ] || { rm -f "$part"; echo "stage-weights: checksum mismatch on $name; copy removed" >&2; exit 4; }
  fi
  mv -f "$part" "$out"
  printf '%s\t%s\t%s\n' "$name" "$size" "$mtime" >> "$dest/.gpunode-progress"
  done_bytes=$((done_bytes + size))
done < "$dest/.gpunode-listing.tmp"

sync -f "$dest" 2>/dev/null || true
mv -f "$dest/.gpunode-listing.tmp" "$dest/.gpunode-manifest"
echo "@@done $total"
