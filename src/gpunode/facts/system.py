"""The operating system around the GPUs: OS, glibc, Pythons, CPUs, memory and
the container's memory limit, /dev/shm, free disk where venvs go, container
and systemd detection.
"""

from __future__ import annotations

import re

from gpunode.facts.cache import Group
from gpunode.facts.snippet import Snippet

# getconf's answer comes from libc.so.6 itself: reused while that file is the same.
GLIBC = Group("glibc", tuple(f"{d}/libc.so.6" for d in (
    "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib")))

# Builtins (read, case, $(( ))) wherever a file can be read without a process: a no-op run
# starts this probe on every target, and each process start inside a container costs about
# as much as parsing its output here.
_HOST = r"""
if { read -r s </proc/sys/kernel/ostype && read -r r </proc/sys/kernel/osrelease; } 2>/dev/null; then
  m=; [ -r /proc/sys/kernel/arch ] && read -r m </proc/sys/kernel/arch; echo "uname=$s $r ${m:-$(uname -m)}"
else echo "uname=$(uname -srm)"; fi
h=; read -r h </proc/sys/kernel/hostname; echo "hostname=$h"
u=; while read -r k _ e _; do case $k in Uid:) u=$e; break;; esac; done </proc/self/status
echo "uid=${u:-$(id -u)}" """

# command -v's PATH search without a process per name; python3's version from the python3.X
# it is the same file as (test -ef), `python3 -V` only when it is none of them (a wrapper).
# PATH is cut with ${..%%:*} rather than split with IFS: no glob can match a PATH entry, and the
# section runs in the probe's own shell (inline), which must keep its options.
_PYTHONS = r"""
p= rest=$PATH:
while [ -n "$rest" ]; do dir=${rest%%:*}; rest=${rest#*:}
  if [ -f "$dir/python3" ] && [ -x "$dir/python3" ]; then p=$dir/python3; break; fi; done
same=
for v in 8 9 10 11 12 13 14 15; do
  rest=$PATH:
  while [ -n "$rest" ]; do dir=${rest%%:*}; rest=${rest#*:}
    if [ -f "$dir/python3.$v" ] && [ -x "$dir/python3.$v" ]; then
      echo "python3.$v $dir/python3.$v"
      [ -n "$same" ] || [ -z "$p" ] || [ ! "$p" -ef "$dir/python3.$v" ] || same="Python 3.$v"
      break; fi; done
done
[ -z "$p" ] || echo "python3 $p ${same:-$("$p" -V 2>&1)}"
true"""

# nproc is sched_getaffinity, which /proc/self/status lists as Cpus_allowed_list (0-3,8).
_CPUS = r"""
l=; while read -r k v; do case $k in Cpus_allowed_list:) l=$v; break;; esac; done </proc/self/status
n=0; IFS=,; for r in $l; do case $r in
  *-*) n=$((n + ${r#*-} - ${r%-*} + 1));; *[0-9]*) n=$((n + 1));; esac; done; unset IFS
[ "$n" -gt 0 ] || n=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
echo "nproc=$n"
[ -r /sys/fs/cgroup/cpu.max ] && read -r x </sys/fs/cgroup/cpu.max && echo "cpu.max=$x"
true"""

# Walk from this process's cgroup up to the root: a limit on any ancestor applies.
# cgroup v2 ("0::/path") and v1 ("N:...memory...:/path"; hybrid hosts have both).
_MEMLIMIT = r"""
p=; q=
while IFS=: read -r id ctl path; do
  case $id:$ctl in 0:) [ -n "$p" ] || p=${path:-/};; [0-9]*:*memory*) [ -n "$q" ] || q=${path:-/};; esac
done </proc/self/cgroup
if [ -n "$p" ]; then d=/sys/fs/cgroup${p%/}; while :; do
  [ -r "$d/memory.max" ] && read -r x <"$d/memory.max" && echo "v2 ${d#/sys/fs/cgroup} $x"
  [ "$d" = /sys/fs/cgroup ] && break; d=${d%/*}; done; fi
if [ -n "$q" ]; then d=/sys/fs/cgroup/memory${q%/}; while :; do
  [ -r "$d/memory.limit_in_bytes" ] && read -r x <"$d/memory.limit_in_bytes" &&
    echo "v1 ${d#/sys/fs/cgroup/memory} $x"
  [ "$d" = /sys/fs/cgroup/memory ] && break; d=${d%/*}; done; fi
true"""

# One df for /dev/shm and the venv root (df -P prints one line per path), cut into its three
# lines with parameter expansion (no set --, no IFS: it runs in the probe's own shell); the
# sections below fall back to a df each when its output is not three lines.
_DF = r"""
gn_dir=$GN_VENV_ROOT
while [ ! -d "$gn_dir" ]; do case $gn_dir in */*) gn_dir=${gn_dir%/*}; gn_dir=${gn_dir:-/};; *) gn_dir=.;; esac; done
gn_df=$(df -Pk /dev/shm "$gn_dir" 2>/dev/null)
gn_df1=${gn_df%%"$gn_nl"*} gn_dfr=${gn_df#*"$gn_nl"}
gn_df2=${gn_dfr%%"$gn_nl"*} gn_df3=${gn_dfr#*"$gn_nl"} gn_df_ok=
case $gn_df3 in *"$gn_nl"*) ;; *) [ "$gn_dfr" = "$gn_df" ] || [ "$gn_df3" = "$gn_dfr" ] || gn_df_ok=1;; esac"""

# /run/systemd/container is what systemd was told by the container manager at boot; only
# without it (no systemd, or not in a container) is the manager asked and PID 1's environment read.
_CONTAINER = r"""
c=; [ -r /run/systemd/container ] && read -r c </run/systemd/container
if [ -n "$c" ]; then echo "run_systemd_container=$c"; else
  echo "detect_virt=$(systemd-detect-virt -c 2>/dev/null)"
  echo "pid1_env=$(tr '\0' '\n' 2>/dev/null </proc/1/environ | sed -n 's/^container=//p')"; fi
x=; read -r x 2>/dev/null </proc/1/comm; echo "pid1=$x"
[ -d /run/systemd/system ] && echo "systemd=yes"
true"""

SNIPPETS = (
    Snippet("host", _HOST, inline=True),
    Snippet("os_release", "while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done </etc/os-release",
            inline=True),
    Snippet("glibc", "getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1", cached=GLIBC),
    Snippet("pythons", _PYTHONS, inline=True),
    Snippet("cpus", _CPUS, inline=True),
    Snippet("meminfo", r"""
while IFS= read -r l; do case $l in
  MemTotal:*) printf '%s\n' "$l";; MemAvailable:*) printf '%s\n' "$l"; break;; esac; done </proc/meminfo""",
            inline=True),
    Snippet("memlimit", _MEMLIMIT, inline=True),
    Snippet("shm", """
if [ -n "$gn_df_ok" ]; then printf '%s\\n%s\\n' "$gn_df1" "$gn_df2"; else df -Pk /dev/shm; fi""", prepare=_DF,
            inline=True),
    Snippet("disk", """echo "path=$gn_dir"
if [ -n "$gn_df_ok" ]; then printf '%s\\n%s\\n' "$gn_df1" "$gn_df3"; else df -Pk "$gn_dir"; fi""", prepare=_DF,
            inline=True),
    Snippet("container", _CONTAINER, inline=True),
)

# cgroup v1 says "no limit" with a huge page-rounded number, not "max".
_UNLIMITED = 1 << 60


def keyvals(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_os_release(text: str) -> tuple[str, str]:
    """(ID, VERSION_ID) from /etc/os-release."""
    values = {k: v.strip('"\'') for k, v in keyvals(text).items()}
    return values.get("ID", ""), values.get("VERSION_ID", "")


def parse_glibc(text: str) -> str | None:
    """'glibc 2.36' (getconf) or 'ldd (Debian GLIBC 2.36-9+deb12u4) 2.36' -> '2.36'."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "musl" in first.lower():
        return None
    m = re.search(r"(\d+\.\d+)\s*$", first) or re.search(r"glibc\s+(\d+\.\d+)", first, re.IGNORECASE)
    return m.group(1) if m else None


def parse_pythons(text: str) -> tuple[tuple[str, ...], str | None]:
    """Versions found as python3.X, and the version of plain python3."""
    found, default = set(), None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and re.fullmatch(r"python3\.\d+", parts[0]):
            found.add(parts[0].removeprefix("python"))
        elif parts[:1] == ["python3"]:
            m = re.search(r"Python (\d+\.\d+)", line)
            default = m.group(1) if m else None
    if default:
        found.add(default)
    return tuple(sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))), default


def parse_cpus(text: str) -> int:
    """CPUs usable: nproc, reduced by a cgroup v2 CPU quota when one is set."""
    values = keyvals(text)
    cpus = int(values["nproc"]) if values.get("nproc", "").isdigit() else 0
    quota, _, period = values.get("cpu.max", "max").partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        cpus = min(cpus or 1 << 30, max(1, -(-int(quota) // int(period))))
    return cpus


def parse_meminfo(text: str) -> int:
    """MemTotal in bytes. Inside an LXC container with lxcfs this is already the container's limit."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else 0


def parse_memlimit(text: str) -> int | None:
    """The smallest cgroup memory limit on the way to the root, in bytes; None = unlimited."""
    limits = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("v1", "v2") and parts[2].isdigit():
            value = int(parts[2])
            if value < _UNLIMITED:
                limits.append(value)
    return min(limits) if limits else None


def parse_df(text: str) -> tuple[int, int]:
    """(size, available) in bytes from `df -Pk PATH`."""
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 6 and parts[1].isdigit() and parts[3].isdigit():
            return int(parts[1]) * 1024, int(parts[3]) * 1024
    return 0, 0


def parse_container(text: str) -> tuple[bool, bool]:
    """(in a container, systemd is PID 1)."""
    values = keyvals(text)
    kinds = {values.get(k, "") for k in ("detect_virt", "run_systemd_container", "pid1_env")} - {"", "none"}
    return bool(kinds), values.get("systemd") == "yes"
