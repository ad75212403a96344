# shellcheck shell=sh
# NftTable's apply (steps/firewall.py): $1 family, $2 table, $3 the nft script, $4 the record of the load.
# One nft transaction replaces the table whole; then what was loaded and what the kernel lists are
# recorded, so that the next run sees the same table, or one changed by hand.
set -e
nft -f "$3"
listing=$(nft list table "$1" "$2")
live=$(printf '%s\n' "$listing" | sha256sum | cut -d' ' -f1)
src=$(sha256sum "$3" | cut -d' ' -f1)
umask 077
printf '%s %s\n' "$src" "$live" > "$4.tmp"
mv -f "$4.tmp" "$4"
