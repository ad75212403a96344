# shellcheck shell=sh disable=SC2086
# SC2086: $missing and $opts are split on purpose: package names and apt's options hold no spaces.
set -e
export DEBIAN_FRONTEND=noninteractive
missing=
for p; do
  s=$(dpkg-query -W -f='${db:Status-Abbrev}' -- "$p" 2>/dev/null) || s=
  case "$s" in ?i" ") ;; *) missing="$missing $p";; esac
done
[ -n "$missing" ] || exit 0
set -- $missing
opts="-y -q --no-install-recommends -o DPkg::Lock::Timeout=300"
opts="$opts -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold -o APT::Status-Fd=1"
updated=0
for p; do
  if ! apt-cache show -- "$p" >/dev/null 2>&1; then apt-get update -q; updated=1; break; fi
done
apt-get install $opts -- "$@" && exit 0
[ $updated = 0 ] || exit 1
echo "gpunode: install failed; retrying once with fresh package lists" >&2
apt-get update -q
apt-get install $opts -- "$@"
