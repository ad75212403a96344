"""What doctor reads on a target, in the facts probe's one round trip: the gpunode units' state,
their last journal lines, the listening TCP sockets and the /dev/nvidia* nodes; and the Evidence
built from those sections (live, or from a saved snapshot plus a journal file the user gives)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gpunode import userfiles
from gpunode.doctor.checks import Evidence, Listener, Unit
from gpunode.errors import InventoryError
from gpunode.facts.parse import parse
from gpunode.facts.probe import gather
from gpunode.facts.snapshot import RawFacts
from gpunode.facts.snippet import Snippet
from gpunode.transport.base import Transport

#: journal lines read per unit
JOURNAL_LINES = 200

# Loaded units (a failed one stays loaded) and installed unit files; a template file
# (gpunode-server@.service) is not a unit that runs, its instances are.
_NAMES = (r"""names=$( { systemctl list-units --all --plain --no-legend --full 'gpunode*' 2>/dev/null
  systemctl list-unit-files --no-legend --full 'gpunode*' 2>/dev/null; } | awk '{print $1}' | """
          r"""grep -v '@\.' | sort -u)""")

SNIPPETS = (
    Snippet("doctor_units", _NAMES + """
[ -z "$names" ] || systemctl show -p Id,LoadState,ActiveState,SubState,Result,NRestarts,MainPID,Description,ExecStart \\
  $names""", when="command -v systemctl >/dev/null 2>&1"),
    # Each line starts with its unit's name, so a finding says which unit printed it.
    Snippet("doctor_journal", _NAMES + f"""
for u in $names; do journalctl -u "$u" -n {JOURNAL_LINES} --no-pager -o short-iso 2>&1 | sed "s|^|$u |"; done
true""", when="command -v journalctl >/dev/null 2>&1"),
    Snippet("doctor_ports", "ss -ltnp", when="command -v ss >/dev/null 2>&1"),
    Snippet("doctor_devices", "ls -1 /dev/nvidia* 2>/dev/null; true"),
)
SECTIONS = tuple(s.name for s in SNIPPETS)


def collect(transport: Transport, venv: str | None = None) -> RawFacts:
    """The facts and doctor's sections of one target, in one command."""
    return gather(transport, venv=venv, extra=SNIPPETS)


def parse_units(text: str) -> tuple[Unit, ...]:
    """`systemctl show -p ...` of several units: blocks of KEY=value separated by blank lines."""
    units = []
    for block in re.split(r"\n\s*\n", text.strip()):
        kv = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        if not kv.get("Id"):
            continue
        argv = re.search(r"argv\[\]=([^;]*)", kv.get("ExecStart", ""))
        port = re.search(r"--port[= ](\d+)\b", argv.group(1)) if argv else None
        units.append(Unit(kv["Id"], kv.get("LoadState", ""), kv.get("ActiveState", ""), kv.get("SubState", ""),
                          kv.get("Description", ""), kv.get("Result", ""), _int(kv.get("NRestarts")),
                          _int(kv.get("MainPID")), int(port.group(1)) if port else None))
    return tuple(units)


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """`ss -ltnp`: State Recv-Q Send-Q Local-Address:Port Peer-Address:Port Process."""
    out = []
    for line in text.splitlines():
        cols = line.split(None, 5)
        if len(cols) < 5 or cols[0] != "LISTEN":
            continue
        address, _, port = cols[3].rpartition(":")
        if port.isdigit():
            out.append(Listener(address, int(port), cols[5].strip() if len(cols) > 5 else ""))
    return tuple(out)


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def evidence(raw: RawFacts, journal: Sequence[str] = ()) -> Evidence:
    """Evidence from the probe's sections; `journal` adds lines the user gave (--journal FILE)."""
    notes = []
    units = raw.get("doctor_units")
    lines = [*(raw.ok("doctor_journal") or "").splitlines(), *journal]
    ports = raw.get("doctor_ports")
    if units is None:
        notes.append("no unit states (no systemctl on the target, or a snapshot of `inv facts`)")
    if raw.get("doctor_journal") is None and not journal:
        notes.append("no journal lines (no journalctl on the target, or none given with --journal)")
    if ports is None:
        notes.append("no listening ports (no ss on the target, or a snapshot of `inv facts`)")
    devices = raw.get("doctor_devices")
    return Evidence(raw.target, parse(raw), units=parse_units(units.output) if units is not None else (),
                    journal=tuple(line for line in lines if line.strip()),
                    devices=devices.output if devices is not None else None,
                    listeners=parse_listeners(ports.output) if ports is not None and ports.ok else None,
                    notes=notes)


def read_journal(path: Path) -> list[str]:
    """A journal the user saved (journalctl -u ... > FILE, or pasted from an issue)."""
    if not path.exists():
        raise InventoryError(f"--journal {path}: {userfiles.missing(path, 'no such file')}",
                             hint="save one with `journalctl -u 'gpunode*' -n 500 --no-pager > FILE`")
    return userfiles.read_text(path, what="journal file", error=InventoryError).splitlines()
