"""The operating system around the GPUs: OS, glibc, Pythons, CPUs, memory and
the container's memory limit, /dev/shm, free disk where venvs go, container
and systemd detection.
"""

from __future__ import annotations

import re

from gpunode.facts.probe import Snippet

SNIPPETS = (
    Snippet("host", 'echo "uname=$(uname -srm)"; echo "hostname=$(cat /proc/sys/kernel/hostname)"; '
                    'echo "uid=$(id -u)"'),
    Snippet("os_release", "cat /etc/os-release"),
    Snippet("glibc", "getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1"),
    Snippet("pythons", r"""
for v in 8 9 10 11 12 13 14 15; do p=$(command -v python3.$v) && echo "python3.$v $p"; done
p=$(command -v python3) && echo "python3 $p $("$p" -V 2>&1)"
true"""),
    Snippet("cpus", r"""
echo "nproc=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
[ -r /sys/fs/cgroup/cpu.max ] && echo "cpu.max=$(cat /sys/fs/cgroup/cpu.max)"
true"""),
    Snippet("meminfo", "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo"),
    # Walk from this process's cgroup up to the root: a limit on any ancestor
    # applies. cgroup v2 and v1 (hybrid hosts have both).
    Snippet("memlimit", r"""
p=$(sed -n 's/^0:://p' /proc/self/cgroup | head -n 1)
if [ -n "$p" ]; then d=/sys/fs/cgroup${p%/}; while :; do
  [ -r "$d/memory.max" ] && echo "v2 ${d#/sys/fs/cgroup} $(cat "$d/memory.max")"
  [ "$d" = /sys/fs/cgroup ] && break; d=${d%/*}; done; fi
p=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' /proc/self/cgroup | head -n 1)
if [ -n "$p" ]; then d=/sys/fs/cgroup/memory${p%/}; while :; do
  [ -r "$d/memory.limit_in_bytes" ] && echo "v1 ${d#/sys/fs/cgroup/memory} $(cat "$d/memory.limit_in_bytes")"
  [ "$d" = /sys/fs/cgroup/memory ] && break; d=${d%/*}; done; fi
true"""),
    Snippet("shm", "df -Pk /dev/shm"),
    Snippet("disk", r"""
d=$GN_VENV_ROOT; while [ ! -d "$d" ]; do d=$(dirname "$d"); done
echo "path=$d"; df -Pk "$d" """),
    Snippet("container", r"""
echo "detect_virt=$(systemd-detect-virt -c 2>/dev/null)"
[ -r /run/systemd/container ] && echo "run_systemd_container=$(cat /run/systemd/container)"
echo "pid1_env=$(tr '\0' '\n' 2>/dev/null </proc/1/environ | sed -n 's/^container=//p')"
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
[ -d /run/systemd/system ] && echo "systemd=yes"
true"""),
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
