# shellcheck shell=sh

t0=$(date +%s); deadline=$(( t0 + $1 )); shift
total=$(( $# / 4 )); ready=" "
while :; do
  now=$(date +%s); n=0; line=""; waiting=""; i=0
  for a in "$@"; do
    case $i in
      0) name=$a ;; 1) unit=$a ;; 2) url=$a ;;
      3) case "$ready" in
           *" $unit "*) st=ready ;;
           *) if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url$a" 2>/dev/null)" = 200 ]; then
                ready="$ready$unit "; st=ready; echo "@@ready $unit"
              # A crash loop shows as NRestarts >= 2 long before systemd gives up (StartLimitBurst). One
              # restart is still loading: a vLLM CPU server's engine core was seen to die once at its first
              # start on the loaded 2-core lab and come up at the second. Only a number counts: a busy
              # systemd that answers nothing is not a crash, so `[ "" -ge 2 ]` failing reads as loading.
              elif systemctl is-failed --quiet "$unit" ||
                   { r=$(systemctl show -P NRestarts "$unit" 2>/dev/null); [ "$r" -ge 2 ] 2>/dev/null; }; then
                echo "@@progress $n $total $line${line:+, }$name failed"; echo "@@failed $unit"; exit 3
              else
                st="loading $(( now - t0 ))s"; waiting=${waiting:-$unit}
                [ "$r" != 1 ] || st="restarted once, $st"
              fi ;;
         esac
         [ "$st" = ready ] && n=$(( n + 1 ))
         line="$line${line:+, }$name $st" ;;
    esac
    i=$(( (i + 1) % 4 ))
  done
  echo "@@progress $n $total $line"
  [ -z "$waiting" ] && exit 0
  if [ "$now" -ge "$deadline" ]; then echo "@@timeout $waiting"; exit 4; fi
  sleep 2
done
