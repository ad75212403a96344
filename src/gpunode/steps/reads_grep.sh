# shellcheck shell=sh
gn_n=$# gn_l=
for gn_f; do
  if [ "$gn_f" = -- ]; then gn_l=1
  elif [ -f "$gn_f" ] && { [ -z "$gn_l" ] || [ ! -L "$gn_f" ]; }; then set -- "$@" "$gn_f"; fi
done
shift "$gn_n"
[ "$#" -eq 0 ] || grep -aHZ '' -- "$@" 2>/dev/null; :
