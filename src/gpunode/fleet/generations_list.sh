# shellcheck shell=sh
# The generations kept on a target (steps/rolling.py): $1 the generations folder. Prints the live one's
# name, the log, then for each kept generation its meta and its files.
root=$1
echo "@@current"; [ ! -f "$root/current" ] || cat "$root/current"
echo "@@log"; [ ! -f "$root/log" ] || cat "$root/log"
for d in "$root"/g-*; do
  [ -d "$d" ] || continue
  echo "@@generation ${d##*/}"; cat "$d/meta" 2>/dev/null; echo
  echo "@@files"; cat "$d/files.list" 2>/dev/null
done
