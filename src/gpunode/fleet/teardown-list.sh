# shellcheck shell=sh
# What teardown would remove (gpunode.fleet.teardown.plan parses it): $1 the weights' root,
# $2 the state folder, $3 1 with --purge, $4 the venvs' root, $5 the patterns of what the
# servers' libraries leave in /dev/shm (globbed here), the rest: the paths gpunode installs.
# Each line is "KiB path" under a "@@section NAME" line (units: the path alone).
root=$1; state=$2; purge=$3; vroot=$4; segments=$5; shift 5
size() { du -sk "$1" 2>/dev/null | cut -f1; }
echo "@@section units"
for f in /etc/systemd/system/gpunode-*.service /etc/systemd/system/gpunode*.target; do [ -e "$f" ] && echo "$f"; done
echo "@@section paths"
for p; do if [ -e "$p" ] || [ -L "$p" ]; then echo "$(size "$p") $p"; fi; done
if [ -L /usr/local/bin/uv ]; then
  case "$(readlink /usr/local/bin/uv)" in /opt/gpunode/*) echo "0 /usr/local/bin/uv";; esac
fi
case "$vroot" in ""|/opt/gpunode/venvs) ;; *)
  for d in "$vroot"/*/; do d=${d%/}; [ -f "$d/gpunode-lock.json" ] && echo "$(size "$d") $d"; done;;
esac
echo "@@section staged"
seen=" "
for r in "$root" $(awk '$3 == "tmpfs" { print $2 }' /proc/mounts 2>/dev/null); do
  case "$seen" in *" $r "*) continue;; esac; seen="$seen$r "
  for d in "$r"/*/; do
    d=${d%/}; { [ -f "$d/.gpunode-manifest" ] || [ -f "$d/.gpunode-progress" ]; } && echo "$(size "$d") $d"
  done
  # A staging run cut before its end leaves its work folder beside the model's (stage-weights.sh).
  for d in "$r"/.gpunode-work.*/; do
    d=${d%/}; [ -d "$d" ] && echo "$(size "$d") $d"
  done
done
echo "@@section segments"
for f in $segments; do [ -f "$f" ] && echo "$(size "$f") $f"; done
echo "@@section state"
[ "$purge" = 1 ] && [ -d "$state" ] && echo "$(size "$state") $state"
exit 0
