# shellcheck shell=sh

# curl's config (the Authorization header, when the servers need a key) comes on stdin
# and goes to curl through a pipe from the shell's builtin printf: never into an argv.
url=$1; body=$2; deadline=$(( $(date +%s) + $3 )); auth=$(cat)
until out=$(printf '%s\n' "$auth" | curl -sS --fail-with-body --max-time 120 -K - \
            -H 'Content-Type: application/json' -d "$body" "$url/v1/completions" 2>&1); do
  [ "$(date +%s)" -lt "$deadline" ] || { printf '%s\n' "$out"; exit 1; }
  sleep 2
done
printf '%s\n' "$out"
