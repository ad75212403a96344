# shellcheck shell=sh

set -e
dest=$1; new=$1.gpunode-new; old=$1.gpunode-old
rm -rf "$old"
[ ! -e "$dest" ] || mv "$dest" "$old"
mv "$new" "$dest"
rm -rf "$old"
