# shellcheck shell=sh
p=$1
if [ -L "$p" ]; then printf 'link\n%s\n' "$(readlink "$p")"
elif [ -e "$p" ]; then printf 'other %s\n' "$(stat -c %F "$p")"
else echo missing; fi
