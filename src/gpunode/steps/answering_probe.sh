# shellcheck shell=sh

for u; do
  printf '%s %s\n' "$u" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$u" 2>/dev/null || echo 000)"
done
