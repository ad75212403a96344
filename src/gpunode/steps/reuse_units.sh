# shellcheck shell=sh disable=SC1007,SC2086
# SC1007: the empty assignments are meant; SC2086: $gn_miss is split on purpose (unit names hold no spaces, checked above).
gn_c="$GN_STATE/reuse-units-$1"; shift
gn_nl='
'
# Enable and require links, listed once: a glob per unit went through these folders each time.
# A name no unit can have (systemd ignores such a link) is left out: no word below is split or globbed.
gn_links=
for gn_f in /etc/systemd/system/*.wants/* /etc/systemd/system/*.requires/* /run/systemd/system/*.wants/* /run/systemd/system/*.requires/*; do
  case $gn_f in *[!A-Za-z0-9:_.@/\\-]*) continue;; esac
  if [ -L "$gn_f" ]; then gn_links="$gn_links L$gn_f"; elif [ -e "$gn_f" ]; then gn_links="$gn_links $gn_f"; fi
done
[ -z "$GN_STATE" ] || command . "$gn_c" 2>/dev/null
gn_i=0 gn_miss= gn_dirty=
for gn_u; do
  gn_i=$((gn_i + 1)) gn_p=
  case $gn_u in *[!A-Za-z0-9:_.@-]*) ;; *)
  for gn_f in /sys/fs/cgroup/system.slice/$gn_u/cgroup.procs /sys/fs/cgroup/unified/system.slice/$gn_u/cgroup.procs /sys/fs/cgroup/systemd/system.slice/$gn_u/cgroup.procs; do
    [ -r "$gn_f" ] || continue
    while read -r gn_l; do gn_p="$gn_p,$gn_l"; done < "$gn_f"; break
  done
  [ ! -L "/run/systemd/units/invocation:$gn_u" ] || gn_p="$gn_p I"
  for gn_f in /etc/systemd/system/$gn_u.d /run/systemd/system/$gn_u.d /lib/systemd/system/$gn_u.d /usr/lib/systemd/system/$gn_u.d /etc/systemd/system.control/$gn_u.d /run/systemd/system.control/$gn_u.d /run/systemd/transient/$gn_u.d; do
    [ ! -e "$gn_f" ] || gn_p=
  done
  [ -z "$gn_p" ] || for gn_f in /etc/systemd/system/$gn_u /run/systemd/system/$gn_u /lib/systemd/system/$gn_u /usr/lib/systemd/system/$gn_u; do
    if [ -L "$gn_f" ]; then gn_p="$gn_p L$gn_f"; elif [ -e "$gn_f" ]; then gn_p="$gn_p $gn_f"; fi
  done
  [ -z "$gn_p" ] || for gn_f in $gn_links; do case $gn_f in */"$gn_u") gn_p="$gn_p $gn_f";; esac; done;; esac
  eval "gn_old=\${gn_old_$gn_i-} gn_out=\${gn_out_$gn_i-}; gn_old_$gn_i= gn_out_$gn_i= gn_sig_$gn_i=\$gn_p"
  if [ -n "$gn_p" ] && [ "$gn_old" = "$gn_p" ] && [ -n "$gn_out" ]; then eval "gn_hit_$gn_i=\$gn_out"
  else
    eval "gn_hit_$gn_i="; gn_miss="$gn_miss $gn_u"
    # A stored answer that no longer holds: the store changes.
    [ -z "$gn_old$gn_out" ] || gn_dirty=1
  fi
done
gn_k=0 gn_rc=0
if [ -n "$gn_miss" ]; then
  gn_o=$(systemctl show -pLoadState -pUnitFileState -pActiveState -pSubState -pNeedDaemonReload -- $gn_miss 2>&1) || gn_rc=$?
  gn_b=
  while IFS= read -r gn_l; do
    if [ -n "$gn_l" ]; then gn_b="$gn_b$gn_l
"; elif [ -n "$gn_b" ]; then gn_k=$((gn_k + 1)); eval "gn_blk_$gn_k=\$gn_b"; gn_b=; fi
  done <<GN_EOF
$gn_o
GN_EOF
  [ -z "$gn_b" ] || { gn_k=$((gn_k + 1)); eval "gn_blk_$gn_k=\$gn_b"; }
fi
if [ "$gn_rc" != 0 ]; then printf '%s\n' "$gn_o"; (exit "$gn_rc"); else
gn_i=0 gn_j=0 gn_store=
for gn_u; do
  gn_i=$((gn_i + 1))
  [ "$gn_i" = 1 ] || echo
  eval "gn_b=\$gn_hit_$gn_i gn_p=\$gn_sig_$gn_i"
  gn_new=
  if [ -z "$gn_b" ]; then
    gn_j=$((gn_j + 1)) gn_new=1; eval "gn_b=\${gn_blk_$gn_j:-}"
    # Stored only when the unit answered exactly "loaded, enabled, active, running" (or exited).
    gn_n=0
    while IFS= read -r gn_l; do
      case $gn_l in
        LoadState=loaded|UnitFileState=enabled|ActiveState=active|NeedDaemonReload=no|SubState=running|SubState=exited)
          gn_n=$((gn_n + 1));;
        '') ;;
        *) gn_n=-99;;
      esac
    done <<GN_EOF
$gn_b
GN_EOF
    printf '%s' "$gn_b"
    [ "$gn_n" = 5 ] || gn_p=
  else printf '%s' "$gn_b"; fi
  # A signature is made of PIDs, unit names and the folders above; a quote would end its word.
  case $gn_p in *\'*) gn_p=;; esac
  [ -z "$gn_p" ] || gn_store="${gn_store}gn_old_$gn_i='$gn_p' gn_out_$gn_i='$gn_b'$gn_nl" gn_dirty=$gn_dirty$gn_new
done
# Written, in one write, only when an answer was stored anew or a stored one no longer holds: a unit
# that is never stored (disabled, stopped, with a drop-in) is asked on every run, yet writes nothing.
if [ -n "$gn_dirty" ] && [ -n "$GN_STATE" ] && [ -n "$GN_EXCLUSIVE" ]; then
  printf '%s' "$gn_store" 2>/dev/null > "$gn_c"
fi
# systemctl's blocks did not match the units asked: the parser then sends each to its own probe.
[ "$gn_j" = "$gn_k" ] || printf '\n%s\n' "gpunode: systemctl show answered $gn_k units, not $gn_j"
fi
