# shellcheck shell=sh
p=$1
if [ -d "$p" ]; then stat -L -c 'dir %a %U %G' "$p"
elif [ -e "$p" ] || [ -L "$p" ]; then printf 'other %s\n' "$(stat -c %F "$p")"
else echo missing; fi
