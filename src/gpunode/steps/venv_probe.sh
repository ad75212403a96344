# shellcheck shell=sh

v=$1
echo "@@section python"
if [ -x "$v/bin/python" ] && [ -f "$v/pyvenv.cfg" ]; then
  while IFS= read -r l || [ -n "$l" ]; do case $l in version*) printf '%s\n' "$l";; esac; done < "$v/pyvenv.cfg"
fi
echo "@@section manifest"
[ ! -f "$v/gpunode-lock.json" ] || cat "$v/gpunode-lock.json"
echo "@@section listing"
for sp in "$v"/lib/python3*/site-packages; do
  cd "$sp" 2>/dev/null || continue
  set -- *; { [ -e "$1" ] || [ -L "$1" ]; } && printf '%s\n' "$@"
done
