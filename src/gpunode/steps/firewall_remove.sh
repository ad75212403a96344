# shellcheck shell=sh
# NoFirewall's apply (steps/firewall.py): $1 the unit, $2 family, $3 table, then the files to remove.
# Stopping the unit deletes the table (its ExecStop); deleting it again covers a unit already gone.
unit=$1 family=$2 table=$3
shift 3
systemctl disable --now "$unit" >/dev/null 2>&1 || true
if nft list table "$family" "$table" >/dev/null 2>&1; then nft delete table "$family" "$table"; fi
rm -f -- "$@"
systemctl daemon-reload
