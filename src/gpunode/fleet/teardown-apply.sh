# shellcheck shell=sh
# Remove what teardown-list.sh listed (gpunode.fleet.teardown.apply, under the lock): $1 the state
# folder, $2 1 with --purge, $3 the number of units, $4 the number of /dev/shm segments, then the
# units' files, the segments and the paths. Prints "@@left PATH" for each one still there.
state=$1; purge=$2; n=$3; m=$4; shift 4
units=""; i=0
while [ $i -lt "$n" ]; do units="$units ${1##*/}"; shift; i=$((i + 1)); done
segments=""; i=0
while [ $i -lt "$m" ]; do segments="$segments $1"; shift; i=$((i + 1)); done
# $units is split on purpose: unit names hold no blanks (systemd refuses them)
if [ -n "$units" ]; then
  # shellcheck disable=SC2086
  systemctl disable --now $units 2>&1 || true
  for u in $units; do rm -f "/etc/systemd/system/$u"; done
  systemctl daemon-reload
  # shellcheck disable=SC2086
  systemctl reset-failed $units 2>/dev/null || true
fi
for p; do rm -rf -- "$p"; done
rmdir /opt/gpunode 2>/dev/null || true
# a segment some process still maps or holds open is not the stopped servers': it stays
for f in $segments; do
  grep -qsF -- "$f" /proc/[0-9]*/maps && continue
  # ls -l shows where each open descriptor leads: that target is what is looked for
  # shellcheck disable=SC2010
  ls -l /proc/[0-9]*/fd 2>/dev/null | grep -qF -- "$f" && continue
  rm -f -- "$f"
done
[ "$purge" = 1 ] && rm -rf -- "$state"
for p in $units "$@" $segments; do case "$p" in gpunode-*) p="/etc/systemd/system/$p";; esac
  if [ -e "$p" ] || [ -L "$p" ]; then echo "@@left $p"; fi
done
exit 0
