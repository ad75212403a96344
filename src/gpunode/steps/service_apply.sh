# shellcheck shell=sh
set -e
u=$1
[ "$(systemctl show -p NeedDaemonReload --value -- "$u")" != yes ] || systemctl daemon-reload
case "$2" in yes) systemctl enable -q -- "$u";; no) systemctl disable -q -- "$u";; esac
fail() { rc=$?; echo "--- systemctl status $u:"; systemctl status --no-pager --lines=20 -- "$u" || true; exit $rc; }
case "$3" in yes) systemctl start -- "$u" || fail;; no) systemctl stop -- "$u" || fail;; esac
