# shellcheck shell=sh
# NftTable's probe (steps/firewall.py): $1 family, $2 table, $3 the file gpunode records each load in.
# Prints "nft yes|no", "live <sha256 of the table's listing>|none" and "loaded <what $3 holds>".
if ! command -v nft >/dev/null 2>&1; then echo "nft no"; exit 0; fi
echo "nft yes"
if listing=$(nft list table "$1" "$2" 2>/dev/null); then
  printf 'live %s\n' "$(printf '%s\n' "$listing" | sha256sum | cut -d' ' -f1)"
else
  echo "live none"
fi
[ ! -f "$3" ] || printf 'loaded %s\n' "$(cat "$3")"
