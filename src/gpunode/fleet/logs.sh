# shellcheck shell=sh
# `inv logs` (gpunode.fleet.logs): $1 the unit (or the pattern gpunode-*), the rest journalctl's
# words. A unit that is not installed: "@@nounit", the gpunode units that are, exit 3.
unit=$1; shift
if [ "$unit" != "gpunode-*" ] && [ ! -e "/etc/systemd/system/$unit" ]; then
  echo "@@nounit"
  for f in /etc/systemd/system/gpunode-*.service; do [ -e "$f" ] && echo "${f##*/}"; done
  exit 3
fi
exec journalctl -u "$unit" --no-pager -o short-iso "$@"
