# shellcheck shell=sh
if [ -f "$1/handlers.pending" ]; then
  while IFS= read -r gn_l || [ -n "$gn_l" ]; do printf '%s\n' "$gn_l"; done < "$1/handlers.pending"
fi
:
