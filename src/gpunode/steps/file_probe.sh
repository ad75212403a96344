# shellcheck shell=sh
p=$1
if [ -L "$p" ]; then printf 'link %s\n' "$(readlink "$p")"; exit 0; fi
if [ ! -e "$p" ]; then echo missing; exit 0; fi
if [ ! -f "$p" ]; then printf 'other %s\n' "$(stat -c %F "$p")"; exit 0; fi
h=$(sha256sum < "$p") || exit 1
stat -c 'file %a %U %G %s' "$p" || exit 1
h=${h%% *}
echo "$h"
[ "$h" = "$2" ] || head -c "$3" "$p"
