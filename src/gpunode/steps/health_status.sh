# shellcheck shell=sh

if command -v bash >/dev/null 2>&1; then exec bash -c '
trap "" PIPE
fds=()
while [ "$1" != -- ]; do
  fd=
  if exec {fd}<>"/dev/tcp/$1/$2"; then
    printf "GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$3" "$1" "$2" >&$fd || {
      exec {fd}<&-; fd=; }
  else fd=; fi 2>/dev/null
  fds+=("$fd"); shift 3
done
for fd in "${fds[@]}"; do
  code=000
  if [ -n "$fd" ]; then
    read -r -t 3 proto status _ <&$fd && case $proto/$status in HTTP/*/[0-9][0-9][0-9]*) code=${status:0:3};; esac
    exec {fd}<&-
  fi 2>/dev/null
  printf "%s\n" "$code"
done' bash "$@"; fi
while [ "$1" != -- ]; do shift 3; done; shift; exec "$@"
