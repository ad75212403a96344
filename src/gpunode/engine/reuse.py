"""Two probe answers reused from the last applying run while builtins say they still hold.

`dpkg-query` and `systemctl show` are the two process starts left in a no-op's round trip
that answer the same thing run after run (issue 9). Each is wrapped in shell text that the
batch runs in its own shell, as a function call (engine/inline.py): it prints the stored answer when a test made of
shell builtins says that nothing it depends on has changed, and otherwise runs the program,
prints its answer as it is and, under the exclusive lock only, stores it. The stores live in
the lock shell's state folder (`$GN_STATE`); outside the lock shell (unset) nothing is reused.

dpkg-query: dpkg never edits /var/lib/dpkg/status in place, it writes a new file and renames
it over the old one, and keeps what it has not written back yet in /var/lib/dpkg/updates/. So
the answer holds while the status file is the same inode as a hard link taken before the
query (`[ A -ef B ]`) and updates/ is empty. Any install, removal or hold since then fails
the test.

systemctl show: only a plain "loaded, enabled, active, running" answer is stored (or "active,
exited": a oneshot with RemainAfterExit=yes, such as the weights' staging unit), and it is
reused while the unit's signature is the same: the PIDs in its cgroup (a restart, a crash or a
stop changes them), whether systemd's /run/systemd/units/invocation:<unit> link is there
(systemd makes it when the unit starts and removes it when the unit stops or fails; it is what
tells an exited oneshot that was stopped from one still active), which `*.wants`/`*.requires`
links name it (enable, disable), and which of its unit file paths exist and are symlinks (mask).
Neither PIDs nor the link: no reuse. A unit with a drop-in folder is always asked. What the
signature misses: a stop that is still in progress (ActiveState=deactivating with the old PIDs
alive) reads as running until the next run. The answers of one list of units are stored together,
as shell assignments that the next run sources in one read, and rewritten only when a unit was
asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from gpunode.engine import inline
from gpunode.steps import apt, systemd

#: Where the PIDs of a unit in system.slice are, cgroup v2 first, then v1's hybrid and legacy trees.
_CGROUPS = ("/sys/fs/cgroup/system.slice", "/sys/fs/cgroup/unified/system.slice", "/sys/fs/cgroup/systemd/system.slice")
_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
_DROPIN_DIRS = (*_UNIT_DIRS, "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient")

# Prints a stored answer ($1) line by line with builtins, as the program printed it.
_PRINT = """gn_print() { while IFS= read -r gn_l; do printf '%s\\n' "$gn_l"; done < "$1"; }
"""

PACKAGES = inline.mark(_PRINT + """gn_c="$GN_STATE/reuse-dpkg-$1"; shift
gn_pending() { for gn_u in /var/lib/dpkg/updates/*; do [ -e "$gn_u" ] && return 0; done; return 1; }
if [ -n "$GN_STATE" ] && [ -s "$gn_c.out" ] && [ /var/lib/dpkg/status -ef "$gn_c.status" ] && ! gn_pending; then
  gn_print "$gn_c.out"
else
  gn_store=; if [ -n "$GN_STATE" ] && [ -n "$GN_EXCLUSIVE" ]; then
    # Emptied first (an empty answer is never reused); linked before the query, so that a
    # dpkg run that ends between the two leaves a link to the status file it replaced.
    : 2>/dev/null > "$gn_c.out" && ln -f /var/lib/dpkg/status "$gn_c.status" 2>/dev/null && gn_store=1
  fi
  gn_o=$(dpkg-query -W -f='""" + apt.FORMAT + """' -- "$@" 2>&1); gn_rc=$?
  [ -z "$gn_o" ] || printf '%s\\n' "$gn_o"
  if [ -n "$gn_store" ] && [ "$gn_rc" = 0 ] && ! gn_pending; then printf '%s\\n' "$gn_o" > "$gn_c.out"; fi
  # dpkg-query's own status (1: a name it does not know): a subshell, only when it ran.
  [ "$gn_rc" = 0 ] || (exit "$gn_rc")
fi
""")

_SHOW = "systemctl show " + " ".join(f"-p{p}" for p in systemd.PROPERTIES) + ' -- "$@"'
_WANTS = " ".join(f"{c}/*.wants/* {c}/*.requires/*" for c in _UNIT_DIRS[:2])

# Per unit: its signature (empty: ask systemd), then its stored block or a place in ONE
# systemctl show of every unit that is asked; the blocks come out in the order of "$@".
# $1 names the store (reuse-units-<key>: one per list of units), sourced in one read: a line
# `gn_old_<i>='<signature>' gn_out_<i>='<block>'` for each unit of the list (empty where none is
# stored). Line by line with `read`, the store cost dash one read(2) per byte.
UNITS = inline.mark("""gn_c="$GN_STATE/reuse-units-$1"; shift
gn_nl='
'
# Enable and require links, listed once: a glob per unit went through these folders each time.
# A name no unit can have (systemd ignores such a link) is left out: no word below is split or globbed.
gn_links=
for gn_f in """ + _WANTS + """; do
  case $gn_f in *[!A-Za-z0-9:_.@/\\\\-]*) continue;; esac
  if [ -L "$gn_f" ]; then gn_links="$gn_links L$gn_f"; elif [ -e "$gn_f" ]; then gn_links="$gn_links $gn_f"; fi
done
[ -z "$GN_STATE" ] || command . "$gn_c" 2>/dev/null
gn_i=0 gn_miss= gn_dirty=
for gn_u; do
  gn_i=$((gn_i + 1)) gn_p=
  case $gn_u in *[!A-Za-z0-9:_.@-]*) ;; *)
  for gn_f in """ + " ".join(f"{c}/$gn_u/cgroup.procs" for c in _CGROUPS) + """; do
    [ -r "$gn_f" ] || continue
    while read -r gn_l; do gn_p="$gn_p,$gn_l"; done < "$gn_f"; break
  done
  [ ! -L "/run/systemd/units/invocation:$gn_u" ] || gn_p="$gn_p I"
  for gn_f in """ + " ".join(f"{c}/$gn_u.d" for c in _DROPIN_DIRS) + """; do
    [ ! -e "$gn_f" ] || gn_p=
  done
  [ -z "$gn_p" ] || for gn_f in """ + " ".join(f"{c}/$gn_u" for c in _UNIT_DIRS) + """; do
    if [ -L "$gn_f" ]; then gn_p="$gn_p L$gn_f"; elif [ -e "$gn_f" ]; then gn_p="$gn_p $gn_f"; fi
  done
  [ -z "$gn_p" ] || for gn_f in $gn_links; do case $gn_f in */"$gn_u") gn_p="$gn_p $gn_f";; esac; done;; esac
  eval "gn_old=\\${gn_old_$gn_i-} gn_out=\\${gn_out_$gn_i-}; gn_old_$gn_i= gn_out_$gn_i= gn_sig_$gn_i=\\$gn_p"
  if [ -n "$gn_p" ] && [ "$gn_old" = "$gn_p" ] && [ -n "$gn_out" ]; then eval "gn_hit_$gn_i=\\$gn_out"
  else
    eval "gn_hit_$gn_i="; gn_miss="$gn_miss $gn_u"
    # A stored answer that no longer holds: the store changes.
    [ -z "$gn_old$gn_out" ] || gn_dirty=1
  fi
done
gn_k=0 gn_rc=0
if [ -n "$gn_miss" ]; then
  gn_o=$(""" + _SHOW.replace('"$@"', "$gn_miss") + """ 2>&1) || gn_rc=$?
  gn_b=
  while IFS= read -r gn_l; do
    if [ -n "$gn_l" ]; then gn_b="$gn_b$gn_l
"; elif [ -n "$gn_b" ]; then gn_k=$((gn_k + 1)); eval "gn_blk_$gn_k=\\$gn_b"; gn_b=; fi
  done <<GN_EOF
$gn_o
GN_EOF
  [ -z "$gn_b" ] || { gn_k=$((gn_k + 1)); eval "gn_blk_$gn_k=\\$gn_b"; }
fi
if [ "$gn_rc" != 0 ]; then printf '%s\\n' "$gn_o"; (exit "$gn_rc"); else
gn_i=0 gn_j=0 gn_store=
for gn_u; do
  gn_i=$((gn_i + 1))
  [ "$gn_i" = 1 ] || echo
  eval "gn_b=\\$gn_hit_$gn_i gn_p=\\$gn_sig_$gn_i"
  gn_new=
  if [ -z "$gn_b" ]; then
    gn_j=$((gn_j + 1)) gn_new=1; eval "gn_b=\\${gn_blk_$gn_j:-}"
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
    [ "$gn_n" = """ + str(len(systemd.PROPERTIES)) + """ ] || gn_p=
  else printf '%s' "$gn_b"; fi
  # A signature is made of PIDs, unit names and the folders above; a quote would end its word.
  case $gn_p in *\\'*) gn_p=;; esac
  [ -z "$gn_p" ] || gn_store="${gn_store}gn_old_$gn_i='$gn_p' gn_out_$gn_i='$gn_b'$gn_nl" gn_dirty=$gn_dirty$gn_new
done
# Written, in one write, only when an answer was stored anew or a stored one no longer holds: a unit
# that is never stored (disabled, stopped, with a drop-in) is asked on every run, yet writes nothing.
if [ -n "$gn_dirty" ] && [ -n "$GN_STATE" ] && [ -n "$GN_EXCLUSIVE" ]; then
  printf '%s' "$gn_store" 2>/dev/null > "$gn_c"
fi
# systemctl's blocks did not match the units asked: the parser then sends each to its own probe.
[ "$gn_j" = "$gn_k" ] || printf '\\n%s\\n' "gpunode: systemctl show answered $gn_k units, not $gn_j"
fi
""")


def key(names: Sequence[str]) -> str:
    """The store's name for one list of packages."""
    return hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]


def packages(argv: Sequence[str]) -> list[str]:
    """A Packages probe (`dpkg-query -W -f=FORMAT -- names`) as the reusing shell."""
    names = list(argv[4:])
    return ["sh", "-c", PACKAGES, "sh", key(names), *names]


def units(names: Sequence[str]) -> list[str]:
    """One `systemctl show` of these units as the reusing shell."""
    return ["sh", "-c", UNITS, "sh", key(names), *names]
