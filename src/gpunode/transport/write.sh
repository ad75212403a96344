# shellcheck shell=sh
# Transport.write_file's shell: stdin into $1 atomically (a temp file in the same folder, fsync,
# chmod $2, chown $3 unless empty, rename). $4 the expected sha256 (empty: not checked); "-"
# (SHA_ON_STDIN): it is stdin's first line instead, so that the hash of a secret file is never
# in a command line (`ps` on the target shows those).
set -e
d=$(dirname "$1"); mkdir -p "$d"; t=$(mktemp "$d/.gpunode.XXXXXX")
trap 'rm -f "$t"' EXIT
w=$4; [ "$w" != - ] || IFS= read -r w
cat > "$t"; chmod "$2" "$t"
[ -z "$3" ] || chown "$3" "$t"
if [ -n "$w" ]; then
  h=$(sha256sum < "$t"); h=${h%% *}
  [ "$h" = "$w" ] || {
    if [ "$4" = - ]; then echo "the content that arrived is not the content sent" >&2
    else echo "content arrived with sha256 $h, expected $w" >&2; fi
    exit 1
  }
fi
sync "$t" 2>/dev/null || sync
mv -f "$t" "$1"
trap - EXIT
