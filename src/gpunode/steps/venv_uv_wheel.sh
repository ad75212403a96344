# shellcheck shell=sh
# The venv that installs uv itself (the tools venv), made without pip and without `python3 -m venv`:
# uv comes out of its own wheel in the wheelhouse (python3's zipfile: no unzip needed), makes the venv
# and installs uv into it, and is removed again by the install command. A venv that already has its
# uv (an update in place) uses that one.
# $1 the venv, $2 the interpreter, $3 uv's version (or *), then the wheelhouse folders.
v=$1 py=$2 ver=$3
shift 3
if [ -f "$v/gpunode-lock.json" ]; then rm -f "$v/gpunode-lock.json"; else rm -rf "$v"; fi
rm -rf "$v.uv-wheel"
u="$v/bin/uv"
if [ ! -x "$u" ]; then
  arch=$(uname -m) whl=
  for pattern in "*manylinux*$arch*" "*$arch*"; do
    for d do
      for f in "$d"/uv-$ver-$pattern.whl; do
        [ -f "$f" ] && { whl=$f; break 3; }
      done
    done
  done
  [ -n "$whl" ] || { echo "no uv wheel (version $ver, $arch) in: $*" >&2; exit 1; }
  u="$v.uv-wheel/uv"
  mkdir -p "$v.uv-wheel" || exit 1
  "$py" -c '
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/uv"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
os.chmod(sys.argv[2], 0o755)
' "$whl" "$u" || { echo "cannot unpack uv from $whl" >&2; exit 1; }
fi
[ -x "$v/bin/python" ] || {
  found=$(command -v "$py") || { echo "$py: not found" >&2; exit 127; }
  mkdir -p "$(dirname "$v")" && "$u" venv -q --no-python-downloads --python "$found" "$v"
}
