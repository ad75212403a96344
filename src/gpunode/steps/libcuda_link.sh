# shellcheck shell=sh

set -e
ldconfig
one=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
[ -n "$one" ] || { echo "libcuda.so.1 is not installed" >&2; exit 3; }
dir=$(dirname "$one")
[ -e "$dir/libcuda.so" ] || ln -s libcuda.so.1 "$dir/libcuda.so"
ldconfig
ldconfig -p | grep -q 'libcuda\.so ' || { echo "ldconfig does not list libcuda.so after linking" >&2; exit 4; }
