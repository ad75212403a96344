# shellcheck shell=sh
# uv for a venv that installs uv itself (venv_uv_wheel.sh): its own once it has one, else the one
# unpacked from the wheel, which goes once the install is done (it is 38 MB).
# $1 the venv, then uv's arguments.
v=$1
shift
u="$v/bin/uv"
[ -x "$u" ] || u="$v.uv-wheel/uv"
verb="$1 $2"
"$u" "$@"
rc=$?
[ "$verb" != "pip install" ] || rm -rf "$v.uv-wheel"
exit $rc
