# shellcheck shell=sh
# `inv status` in one round trip (gpunode.fleet.gather runs it, gpunode.fleet.status parses it).
# stdin: two lines of curl config: the servers' API key header, then the fleet router's (either
# empty when not needed); each reaches curl through a pipe from printf (a builtin): never an argv. $1: seconds between the two /metrics
# samples (0: one sample); $2: the unit properties to print; $3, $4: the router's and
# the fleet router's unit; $5: the fleet router's map of workers. Each section starts with a line
# "@@section NAME [UNIT [TIME]]"; nothing a server prints can start with that (/metrics lines
# start with a metric name and JSON with '{').
IFS= read -r auth || true; IFS= read -r fleet_auth || true; sample=$1; props=$2; router_unit=$3; fleet_unit=$4; fleet_map=$5
failure='error|exception|traceback|killed|out of memory|oom|fatal|panicked|main process exited'
failure="$failure|failed with result|start request repeated|failed to start|timed out"
units=""
for f in /etc/systemd/system/gpunode-*.service; do
  [ -e "$f" ] || continue
  case "$f" in *@.service) continue;; esac
  units="$units ${f##*/}"
done
echo "@@section clock"; date '+%s %Z %z'
if command -v nvidia-smi >/dev/null 2>&1; then echo "@@section nvidia-smi"; nvidia-smi 2>&1 | head -c 200000; fi
# $units is split on purpose here and below: unit names hold no blanks (systemd refuses them)
echo "@@section units"
# shellcheck disable=SC2086
echo $units
[ -n "$units" ] || exit 0
# shellcheck disable=SC2086
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
  case "$id" in "$router_unit"|"$fleet_unit") router=1;; *) router="";; esac
  key=$auth; [ "$id" = "$fleet_unit" ] && key=$fleet_auth
  echo "@@section port $id"; echo "$port $mport"
  if [ -n "$router" ]; then path=/readiness; else path=/health; fi
  echo "@@section health $id"
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 3 "http://$host:$port$path" 2>/dev/null || true
  echo "@@section models $id"
  printf '%s\n' "$key" | curl -s --max-time 3 -K - "http://$host:$port/v1/models" 2>/dev/null; echo
  if [ -n "$router" ]; then
    echo "@@section workers $id"
    printf '%s\n' "$key" | curl -s --max-time 3 -K - "http://$host:$port/workers" 2>/dev/null; echo
    [ -z "$mport" ] && mport=29000
    metrics metrics "$id" "$mport"
  else
    metrics metrics "$id" "$port"
  fi
done
if [ "$sample" != 0 ]; then
  sleep "$sample"
  printf '%s\n' "$ports" | while read -r id port mport; do
    [ -n "$id" ] && [ "$id" != "$router_unit" ] && [ "$id" != "$fleet_unit" ] && metrics metrics2 "$id" "$port"
  done
fi
for u in $units; do
  echo "@@section journal $u"
  journalctl -u "$u" -n 1000 -o short-iso --no-pager 2>/dev/null | grep -aiE "$failure" | tail -n 5
done
echo "@@section env"; grep -H '^CUDA_VISIBLE_DEVICES=' /etc/gpunode/*.env 2>/dev/null
if [ -r "$fleet_map" ]; then echo "@@section fleetmap"; cat "$fleet_map"; fi
exit 0
