# shellcheck shell=sh

deadline=$(( $(date +%s) + $1 )); shift
for u; do
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$u" 2>/dev/null)" = 200 ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "no answer with 200 from $u"; exit 4; fi
    sleep 0.2
  done
done
