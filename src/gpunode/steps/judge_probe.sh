# shellcheck shell=sh disable=SC3013
# (-nt: dash, bash and busybox sh have it; one test instead of a find per server)
# The engine judges the servers whose command line, environment or venv changed (steps/judge.py).
# $1 the venv's python, $2 its lock manifest, $3 the deadline (s), $4 nodecheck.py's text,
# $5 what the manifest must name (one per line), $6 the markers' folder; then per server: name, its
# marker, its digest, its case (JSON). The marker holds the digest the engine accepted last, MARKER.refused
# the digest it refused last and the refusal (JSON). A server whose marker holds its digest, in a venv not
# installed since, prints "judged NAME" (one whose refusal holds it, the refusal again): that is the
# whole of a no-op, in shell builtins. The others go to the venv's python.

gn_jpy=$1 gn_jman=$2 gn_jdl=$3 gn_jsrc=$4 gn_jexp=$5 gn_jdir=$6
shift 6
gn_jcases=
while [ $# -ge 4 ]; do
  gn_jmark='' gn_jline=''
  [ ! -f "$2" ] || [ "$gn_jman" -nt "$2" ] || read -r gn_jmark < "$2" || :
  if [ "$gn_jmark" = "$3" ]; then
    printf 'judged %s\n' "$1"
  else
    [ ! -f "$2.refused" ] || [ "$gn_jman" -nt "$2.refused" ] || { read -r gn_jmark; read -r gn_jline; } < "$2.refused" || :
    if [ "$gn_jmark" = "$3" ]; then
      printf '%s\n' "$gn_jline"
    else
      gn_jcases="$gn_jcases$4
"
    fi
  fi
  shift 4
done
# Verdicts are kept (nodecheck --record) only by a run that holds the target's lock alone.
gn_jrec=
[ "${GN_EXCLUSIVE:-}" != 1 ] || gn_jrec=$gn_jdir
if [ -z "$gn_jcases" ]; then
  :
elif [ -x "$gn_jpy" ]; then
  printf '%s' "$gn_jcases" | "$gn_jpy" -c "$gn_jsrc" --cases - --deadline "$gn_jdl" --manifest "$gn_jman" \
    --expect "$gn_jexp" --record "$gn_jrec"
else
  printf '{"pending": "%s has no python yet"}\n' "$gn_jpy"
fi
