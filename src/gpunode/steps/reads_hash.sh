# shellcheck shell=sh
gn_n=$#
for gn_f; do if [ -f "$gn_f" ] && [ ! -L "$gn_f" ]; then set -- "$@" "$gn_f"; fi; done
shift "$gn_n"
[ "$#" -eq 0 ] || sha256sum -z -- "$@" 2>/dev/null; :
