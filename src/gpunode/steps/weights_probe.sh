# shellcheck shell=sh

gn_src=$1 gn_dest=$2
echo "@@section found"
if [ ! -d "$gn_src" ]; then echo "@@missing"
elif [ -d "$gn_dest" ]; then find -L "$gn_src" "$gn_dest" -type f -printf '%H\t%P\t%s\t%T@\n'
else find -L "$gn_src" -type f -printf '%H\t%P\t%s\t%T@\n'; fi
[ ! -d "${gn_dest%/*}/.gpunode-work.${gn_dest##*/}" ] || echo "@@work"
echo "@@section manifest"
[ ! -f "$gn_dest/.gpunode-manifest" ] || cat "$gn_dest/.gpunode-manifest"
echo "@@section space"
gn_parent=$gn_dest
while [ ! -d "$gn_parent" ]; do
  case $gn_parent in */*) gn_parent=${gn_parent%/*}; gn_parent=${gn_parent:-/} ;; *) gn_parent=. ;; esac
done
df -B1 --output=avail,size "$gn_parent"
