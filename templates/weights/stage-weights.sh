#!/bin/sh
# Managed by gpunode. Stages a model folder into memory (/dev/shm), resumably.
#
#   stage-weights.sh [-x PATH]... SRC DEST [sha256]
#
# -x leaves out a file of SRC (a path relative to it): another copy of the weights
# that the servers do not load (gpunode's facts/served.py names them).
#
# What a re-run, the step's probe and the servers' boot unit rely on:
# - DEST never holds a half-written file under its real name: a file is written as
#   NAME.gpunode-part or under the work folder and renamed into place when complete.
# - The work folder is .gpunode-work.NAME beside DEST (NAME: DEST's last part), not in
#   it: a cut leaves in DEST only the model's files, part files and .gpunode-* files,
#   which is what the servers, the step's probe and a user listing DEST see. The next
#   run removes it, whether it copies or not. Only where DEST is a file system of its
#   own (a mount point) is it DEST/.gpunode-work: a rename across file systems copies,
#   and a cut mid-copy would leave a half file under its real name.
# - Finished files are recorded in DEST/.gpunode-progress (name, size, mtime) and not
#   copied again; an interrupted large file resumes from the last whole 4 MiB block
#   of its part file.
# - Every copy's size is checked against the listing; with sha256, its checksum too.
# - The manifest DEST/.gpunode-manifest is written last, atomically, and is what a
#   re-run and the servers' boot unit compare with the source.
# - Progress: @@total BYTES, @@progress DONE TOTAL NAME per chunk or group, @@done.
#
# Cost, so that it stays near cp's whatever the number of files: files under 64 MiB are
# copied in groups of up to 256 MiB, each by one cp, and renamed by one mv for the folders
# DEST lacks (moved whole) and one per folder it has; a larger file in 256 MiB chunks of
# 4 MiB writes, by up to 4 workers at once (half the cores; GPUNODE_STAGE_JOBS sets it). A
# re-run over a complete copy lists both folders once and decides in one awk.
set -eu
nl='
'
skip=
while [ "$#" -gt 0 ] && [ "$1" = -x ]; do skip="$skip${2:?-x needs a path}$nl"; shift 2; done
src=${1:?usage: stage-weights.sh [-x PATH]... SRC DEST [sha256]}
dest=${2:?usage: stage-weights.sh [-x PATH]... SRC DEST [sha256]}
verify=${3:-}
# Absolute, since the copy runs from inside each folder.
case $src in /*) ;; *) src=$PWD/$src ;; esac
case $dest in /*) ;; *) dest=$PWD/$dest ;; esac
while :; do case $dest in ?*/) dest=${dest%/} ;; *) break ;; esac; done
bs=4194304
chunk_blocks=64
small=67108864
group=268435456
tab=$(printf '\t')
have=$dest/.gpunode-have.tmp
plan=$dest/.gpunode-plan.tmp

[ -d "$src" ] || { echo "stage-weights: source $src is not a folder" >&2; exit 2; }
[ -d "$dest" ] || mkdir -p "$dest"
parent=${dest%/*}
parent=${parent:-/}
beside=$parent/.gpunode-work.${dest##*/}
inside=$dest/.gpunode-work
: >> "$dest/.gpunode-progress"
# -L: a link in the source (a Hugging Face cache snapshot is made of them) is copied as its file.
list_source() { (cd "$src" && find -L . -type f ! -name '.gpunode-*' -printf '%P\t%s\t%T@\n'); }
if [ -z "$skip" ]; then
  list_source | LC_ALL=C sort > "$dest/.gpunode-listing.tmp"
else
  list_source | SKIP=$skip awk -F'\t' 'BEGIN { n = split(ENVIRON["SKIP"], s, "\n"); for (i = 1; i <= n; i++) out[s[i]] = 1 }
    !($1 in out)' | LC_ALL=C sort > "$dest/.gpunode-listing.tmp"
fi

# What is left: a file is staged when the progress file records it as listed now (name, size,
# mtime) and the copy under its real name has that size. The plan puts the rest in groups of
# small files (g<N>) and, for the workers, large files and any with a part file left by a cut (l).
(cd "$dest" && find . -path ./.gpunode-work -prune -o -type f -printf '%P\t%s\n' -o -type d -printf '%P/\n') > "$have"
# shellcheck disable=SC2046  # split on purpose: the plan's counts become $1, $2, ...
set -- $(PLAN=$plan awk -F'\t' -v small=$small -v group=$group '
    FILENAME == ARGV[1] { have[$1] = $2; next }
    FILENAME == ARGV[2] { staged[$0] = 1; next }
    $1 == "" { next }
    NF != 3 { if (bad == "") bad = $1; next }
    { total += $2 }
    ($0 in staged) && ($1 in have) && have[$1] == $2 { done += $2; next }
    $2 < small && !(($1 ".gpunode-part") in have) {
      if (n > 0 && bytes + $2 > group) { groups++; n = 0; bytes = 0 }
      print "g" (groups + 0) "\t" $0 > ENVIRON["PLAN"]; n++; bytes += $2; next
    }
    { print "l\t" $0 > ENVIRON["PLAN"]; large++ }
    END { if (bad != "") { gsub(/[^A-Za-z0-9._-]/, "?", bad); print "BAD " bad; exit }
          printf "%.0f %.0f %d %d\n", total, done, groups + (n > 0), large }' \
  "$have" "$dest/.gpunode-progress" "$dest/.gpunode-listing.tmp")
# A name holding a line break or a tab splits its listing line: refused before anything is copied.
if [ "${1:-}" = BAD ]; then
  echo "stage-weights: a file of $src has a line break or a tab in its name (near '${2:-?}'); names are read" \
    "line by line here and by the servers' tools: rename it, then re-run" >&2
  exit 2
fi
[ "$#" -eq 4 ] || { echo "stage-weights: could not list $dest" >&2; exit 5; }
total=$1 done_bytes=$2 groups=$3 large=$4
echo "@@total $total"
[ "$done_bytes" -eq 0 ] || echo "@@progress $done_bytes $total"

copy_group() {  # $1: a list of small files (name, size, mtime), copied by one cp and renamed in few mv
  list=$1
  # Modes as dd and mkdir gave them (0644, 0755), not a read-only source's, so a re-stage can write.
  (cd "$src" && xargs -d '\n' cp -L --parents --no-preserve=mode -t "$new" -- < "$list.names")
  (cd "$new" && find . -type f -printf '%P\t%s\n') > "$work/got"
  # Each copy's size, then what moves: for each file, the highest folder of it that DEST lacks
  # (renamed whole, with its files) or the file itself, grouped by the folder it goes into, so
  # that a fresh copy takes one mv and a folder DEST has one mv more.
  bad=$(WORK=$work awk -F'\t' '
    FILENAME == ARGV[1] { got[$1] = $2; next }
    FILENAME == ARGV[2] { n = split($1, c, "/"); p = c[1]
                          for (i = 2; i <= n; i++) { dirs[p] = 1; p = p "/" c[i] }
                          if ($1 ~ /\/$/) dirs[substr($1, 1, length($1) - 1)] = 1; next }
    !(($1 in got) && got[$1] == $2) { print $1; exit }
    { n = split($1, c, "/"); d = "."; p = c[1]
      for (i = 1; i < n && (p in dirs); i++) { d = p; p = p "/" c[i + 1] }
      if (p in unit) next
      unit[p] = 1
      if (!(d in k)) { k[d] = m++; print d > (ENVIRON["WORK"] "/moves") }
      print p > (ENVIRON["WORK"] "/move-" k[d]) }' "$work/got" "$have" "$list")
  [ -z "$bad" ] || { echo "stage-weights: $bad changed while it was copied (its size is not the listed one); re-run" >&2; exit 3; }
  if [ "$verify" = sha256 ]; then
    (cd "$src" && xargs -d '\n' sha256sum -- < "$list.names") > "$work/sums-source"
    (cd "$new" && xargs -d '\n' sha256sum -- < "$list.names") > "$work/sums-copy"
    bad=$(awk 'NR == FNR { s[FNR] = $0; next } s[FNR] != $0 { sub(/^[^ ]* [ *]/, ""); print; exit }' \
      "$work/sums-source" "$work/sums-copy")
    [ -z "$bad" ] || { rm -rf "$new"; echo "stage-weights: checksum mismatch on $bad; copy removed" >&2; exit 4; }
  fi
  i=0
  while IFS= read -r d; do
    (cd "$new" && xargs -d '\n' mv -f -t "$dest/$d" -- < "$work/move-$i")
    i=$((i + 1))
  done < "$work/moves"
  # Recorded as staged, and as there for the next group's moves.
  PROGRESS=$dest/.gpunode-progress HAVE=$have awk -F'\t' '
    { print >> ENVIRON["PROGRESS"]; print $1 "\t" $2 >> ENVIRON["HAVE"]; s += $2; n = $1 }
    END { printf "@@chunk %.0f %s\n", s, n }' "$list"
}

copy_large() {  # $1: a worker's list of files, each copied in chunks to NAME.gpunode-part
  while IFS="$tab" read -r name size mtime; do
    out="$dest/$name"
    [ -d "${out%/*}" ] || mkdir -p "${out%/*}"
    part="$out.gpunode-part"
    have=0
    [ ! -f "$part" ] || have=$(stat -c %s "$part")
    have=$((have / bs * bs))
    [ "$have" -le "$size" ] || have=0
    if [ "$have" -eq 0 ]; then : > "$part"; else truncate -s "$have" "$part"; fi
    [ "$have" -eq 0 ] || echo "@@chunk $have $name"
    while [ "$have" -lt "$size" ]; do
      dd if="$src/$name" of="$part" bs=$bs skip=$((have / bs)) seek=$((have / bs)) \
         count=$chunk_blocks conv=notrunc status=none
      now=$(stat -c %s "$part")
      [ "$now" -gt "$have" ] || { echo "stage-weights: no progress copying $name (source shrank?)" >&2; exit 3; }
      echo "@@chunk $((now - have)) $name"
      have=$now
    done
    [ "$have" -eq "$size" ] || { echo "stage-weights: $name changed while it was copied ($have bytes, listed $size); re-run" >&2; exit 3; }
    if [ "$verify" = sha256 ]; then
      a=$(sha256sum < "$src/$name" | cut -d' ' -f1)
      b=$(sha256sum < "$part" | cut -d' ' -f1)
      [ "$a" = "$b" ] || { rm -f "$part"; echo "stage-weights: checksum mismatch on $name; copy removed" >&2; exit 4; }
    fi
    mv -f "$part" "$out"
    printf '%s\t%s\t%s\n' "$name" "$size" "$mtime" >> "$dest/.gpunode-progress"
  done < "$1"
}

copy_all() {
  i=0
  while [ "$i" -lt "$groups" ]; do copy_group "$work/group-$i"; i=$((i + 1)); done
  pids=
  i=0
  while [ "$i" -lt "$jobs" ]; do
    if [ -s "$work/large-$i" ]; then copy_large "$work/large-$i" & pids="$pids $!"; fi
    i=$((i + 1))
  done
  rc=0
  for p in $pids; do wait "$p" || rc=$?; done
  return "$rc"
}

if [ "$groups" -gt 0 ] || [ "$large" -gt 0 ]; then
  work=$beside
  # shellcheck disable=SC2046  # split on purpose: two device numbers
  set -- $(stat -c %d "$dest" "$parent")
  [ "$1" = "$2" ] || work=$inside
  new=$work/new
  rm -rf "$beside" "$inside"
  mkdir -p "$new"
  # Workers: half the cores, 1 to 4. The copy is memory-bound work in the kernel: on 2 busy
  # cores a second worker made it slower (docs/bench-results/staging.md), and a few saturate a big node.
  jobs=1
  [ "$large" -lt 2 ] || jobs=${GPUNODE_STAGE_JOBS:-$(($(nproc 2>/dev/null || echo 2) / 2))}
  [ "$jobs" -ge 1 ] || jobs=1
  [ "$jobs" -le 4 ] || jobs=4
  # The plan's lists: one file a group, one a worker (large files dealt round-robin).
  WORK=$work awk -F'\t' -v jobs="$jobs" '
    { k = $1; sub(/^[^\t]*\t/, "") }
    k == "l" { print > (ENVIRON["WORK"] "/large-" (n++ % jobs)); next }
    { f = ENVIRON["WORK"] "/group-" substr(k, 2)
      if (f != last) { if (last != "") { close(last); close(last ".names") } last = f }
      print > f; print substr($0, 1, index($0, "\t") - 1) > (f ".names") }' "$plan"
  # The workers' @@chunk lines (bytes just copied) become @@progress lines of the whole copy; a
  # failure reaches the awk as @@fail, whose exit status is the pipeline's.
  { copy_all & wait "$!" || echo "@@fail $?"; } |
    awk -v done="$done_bytes" -v total="$total" '
      $1 == "@@chunk" { done += $2; n = $0; sub(/^@@chunk [0-9]+ ?/, "", n)
                        printf "@@progress %.0f %.0f %s\n", done, total, n; fflush(); next }
      $1 == "@@fail" { rc = $2; next }
      { print; fflush() }
      END { exit rc }'
  sync -f "$dest" 2>/dev/null || true
fi
# A cut run's work folder goes too, when this run had nothing left to copy.
rm -rf "$beside" "$inside" "$have" "$plan"
mv -f "$dest/.gpunode-listing.tmp" "$dest/.gpunode-manifest"
echo "@@done $total"
