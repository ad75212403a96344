"""One round trip to a target for everything `inv status` shows.

A single shell script on the target: the unit files gpunode installed, ONE `systemctl show`
of all of them, each server's and the router's port (read from their ExecStart) with curl
(health or readiness, /v1/models, /metrics twice `sample` seconds apart, the router's
/workers; a fleet router's too, with its map of workers to targets), the tail of each unit's
journal filtered to failure lines, nvidia-smi where present and the clock. Its output is
sections; gpunode.fleet.status parses them here.
"""

from __future__ import annotations

from gpunode.fleet.units import PROPERTIES
from gpunode.transport.base import Transport

UNIT_DIR = "/etc/systemd/system"
ROUTER_UNIT = "gpunode-router.service"
FLEET_UNIT = "gpunode-fleet-router.service"  # fleet/endpoint.py
FLEET_MAP = "/etc/gpunode/fleet-router.workers"  # url target server, one worker a line

# The curl config (the servers' API key header, when they need one) comes on stdin and reaches
# curl through a pipe from printf (a builtin): never an argv. Each section starts with a line
# "@@section NAME [UNIT [TIME]]"; nothing a server prints can start with that (curl output is
# indented by nothing, but /metrics lines start with a metric name and JSON with '{').
SCRIPT = r"""
auth=$(cat); sample=$1; props=$2
failure='error|exception|traceback|killed|out of memory|oom|fatal|panicked|main process exited'
failure="$failure|failed with result|start request repeated|failed to start|timed out"
units=""
for f in __UNIT_DIR__/gpunode-*.service; do
  [ -e "$f" ] || continue
  case "$f" in *@.service) continue;; esac
  units="$units ${f##*/}"
done
echo "@@section clock"; date '+%s %Z %z'
if command -v nvidia-smi >/dev/null 2>&1; then echo "@@section nvidia-smi"; nvidia-smi 2>&1 | head -c 200000; fi
echo "@@section units"; echo $units
[ -n "$units" ] || exit 0
show=$(systemctl show $units -p "$props" --no-pager 2>&1)
echo "@@section show"; printf '%s\n' "$show"
ports=$(printf '%s\n' "$show" | awk 'BEGIN{RS="";FS="\n"} {id="";p="";m="";h="";
  for(i=1;i<=NF;i++){ if($i ~ /^Id=/) id=substr($i,4)
    if($i ~ /^ExecStart=/){ n=split($i,w," "); for(j=1;j<n;j++){ if(w[j]=="--port") p=w[j+1]
      if(w[j]=="--prometheus-port") m=w[j+1]; if(w[j]=="--host") h=w[j+1] } } }
  if(id!="" && p ~ /^[0-9]+$/){ if(m !~ /^[0-9]+$/) m="-"; if(h !~ /^[0-9.]+$/) h="127.0.0.1"; print id, p, m, h } }')
metrics() {
  echo "@@section $1 $2 $(date +%s.%N)"
  curl -s --max-time 3 "http://127.0.0.1:$3/metrics" 2>/dev/null | grep -E '^(vllm:|sglang:|smg_)' | grep -v '_bucket{'
}
printf '%s\n' "$ports" | while read -r id port mport host; do
  [ -n "$id" ] || continue
  [ "$mport" = - ] && mport=""
  # a server or router on a wildcard is asked on loopback, one bound to an address (a fleet's) there
  case "$host" in ""|0.0.0.0) host=127.0.0.1;; esac
  case "$id" in __ROUTER__|__FLEET__) router=1;; *) router="";; esac
  echo "@@section port $id"; echo "$port $mport"
  if [ -n "$router" ]; then path=/readiness; else path=/health; fi
  echo "@@section health $id"
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 3 "http://$host:$port$path" 2>/dev/null || true
  echo "@@section models $id"
  printf '%s\n' "$auth" | curl -s --max-time 3 -K - "http://$host:$port/v1/models" 2>/dev/null; echo
  if [ -n "$router" ]; then
    echo "@@section workers $id"
    printf '%s\n' "$auth" | curl -s --max-time 3 -K - "http://$host:$port/workers" 2>/dev/null; echo
    [ -z "$mport" ] && mport=29000
    metrics metrics "$id" "$mport"
  else
    metrics metrics "$id" "$port"
  fi
done
if [ "$sample" != 0 ]; then
  sleep "$sample"
  printf '%s\n' "$ports" | while read -r id port mport; do
    [ -n "$id" ] && [ "$id" != __ROUTER__ ] && [ "$id" != __FLEET__ ] && metrics metrics2 "$id" "$port"
  done
fi
for u in $units; do
  echo "@@section journal $u"
  journalctl -u "$u" -n 1000 -o short-iso --no-pager 2>/dev/null | grep -aiE "$failure" | tail -n 5
done
echo "@@section env"; grep -H '^CUDA_VISIBLE_DEVICES=' /etc/gpunode/*.env 2>/dev/null
if [ -r __FLEET_MAP__ ]; then echo "@@section fleetmap"; cat __FLEET_MAP__; fi
exit 0
""".replace("__UNIT_DIR__", UNIT_DIR).replace("__ROUTER__", ROUTER_UNIT).replace("__FLEET__", FLEET_UNIT) \
    .replace("__FLEET_MAP__", FLEET_MAP)


def sections(text: str) -> list[tuple[str, list[str], list[str]]]:
    """The script's output -> [(name, [header words after the name], body lines)], in order."""
    out: list[tuple[str, list[str], list[str]]] = []
    for line in text.splitlines():
        if line.startswith("@@section "):
            words = line.split()[1:]
            out.append((words[0], words[1:], []))
        elif out:
            out[-1][2].append(line)
    return out


def gather(target: Transport, auth: str = "", sample: float = 1.0) -> str:
    """Run the script on the target; its whole output (parse with status.parse)."""
    seconds = f"{sample:g}"
    result = target.run(["sh", "-c", SCRIPT, "sh", seconds, ",".join(PROPERTIES)], stdin=auth.encode(),
                        timeout=120 + sample)
    result.check("gathering the status (systemctl, curl, journalctl)")
    return result.stdout
