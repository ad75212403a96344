"""What systemd and the journal say about gpunode's units, parsed from their text output.

- `systemctl show UNIT... -p ...`: one block of KEY=VALUE lines per unit, blank line between;
- ExecStart's value `{ path=... ; argv[]=ARGS ; ... }`: the command line systemd runs;
- timestamps in systemd's default form, `Thu 2026-12-03 10:54:02 UTC`;
- journal lines (`journalctl -o short-iso`): which one says why a unit failed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

PROPERTIES = ("Id", "Description", "LoadState", "ActiveState", "SubState", "MainPID", "NRestarts",
              "ActiveEnterTimestamp", "InactiveEnterTimestamp", "ExecMainStatus", "Result", "UnitFileState",
              "ExecStart")


def parse_show(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show` of several units -> {Id: {property: value}}, in output order."""
    out: dict[str, dict[str, str]] = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        props = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep and key and " " not in key:
                props[key] = value
        if props.get("Id"):
            out[props["Id"]] = props
    return out


def exec_argv(value: str) -> list[str]:
    """ExecStart's `{ path=... ; argv[]=a b c ; ignore_errors=no ; ... }` -> [a, b, c].

    systemd (252) prints argv[] joined by spaces without quoting (tests/data/fleet/README.md),
    so a word with a space in it comes back as two; gpunode's own flags and values have none.
    An empty list when there is no argv.
    """
    m = re.search(r"argv\[\]=(.*?) ; (?:ignore_errors|start_time)=", value)
    if not m:
        return []
    return m.group(1).split()


_STAMP = re.compile(r"^\w{3} (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (\S+)$")
_OFFSET = re.compile(r"^([+-])(\d{2})(\d{2})$")


def parse_stamp(value: str, local_zone: str = "UTC", local_offset: str = "+0000") -> datetime | None:
    """`Thu 2026-12-03 10:54:02 UTC` -> an aware datetime; None for an empty or unknown zone.

    systemd prints the target's local zone by its abbreviation; the target's own `date +%Z %z`
    (local_zone, local_offset) says what that abbreviation means there.
    """
    m = _STAMP.match(value.strip())
    if not m:
        return None
    zone = m.group(2)
    if zone == "UTC":
        tz = UTC
    elif zone == local_zone and (o := _OFFSET.match(local_offset)):
        sign = -1 if o.group(1) == "-" else 1
        tz = timezone(sign * timedelta(hours=int(o.group(2)), minutes=int(o.group(3))))
    else:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz)


# A server's own words for a failure, strongest first; systemd's lines say only that it exited.
_CAUSE = re.compile(r"\b(\w*Error|\w*Exception|Traceback|CUDA error|out of memory|OOM|Killed|RuntimeError|"
                    r"FATAL|panicked)\b", re.IGNORECASE)
_SYSTEMD = re.compile(r"\bsystemd\[1\]:")
_ENDING = re.compile(r"Main process exited|Failed with result|Start request repeated|Scheduled restart|"
                     r"start operation timed out|Failed to start")


def failure_line(lines: list[str]) -> str | None:
    """The journal line that best says why a unit failed: the last line of the server naming
    an error, else systemd's last line about the exit; None when neither is there."""
    own = [x for x in lines if not _SYSTEMD.search(x) and _CAUSE.search(x)]
    if own:
        return own[-1].strip()
    ends = [x for x in lines if _SYSTEMD.search(x) and _ENDING.search(x)]
    return ends[-1].strip() if ends else None


def human_seconds(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"
