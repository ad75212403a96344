"""State the engine keeps on the target, under state_dir (default /var/lib/gpunode):

- journal.jsonl: one JSON line per applied step or fired handler
  (time, run, by, role, kind, step, summary);
- handlers.pending: handlers notified but not yet fired, one "role<TAB>name"
  per line. It is written before the notifying step applies (write-ahead),
  so neither a failed later step nor a connection lost right after the
  change can lose a restart; a line goes only once its handler succeeded.

Both change in ONE command per update. The runner holds the lock, so its own
view of the pending set is the truth and is written whole, atomically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from gpunode import shell
from gpunode.engine import inline
from gpunode.engine.lock import guard, lost, lost_error
from gpunode.transport.base import Transport

JOURNAL = "journal.jsonl"
PENDING = "handlers.pending"

# Durable as well as atomic: the journal append and the pending file are fsynced before
# the command reports success (GNU `sync FILE...` fsyncs just those; a folder's fsync makes a
# rename or removal in it stick). A last line torn by a crash gets its newline first, so the
# new entry starts on a line of its own and the reader loses only the torn one.
_UPDATE = """set -e
d=$1
""" + guard("$d", "$5") + """
j="$d/journal.jsonl"
if [ -n "$2" ]; then
  if [ -s "$j" ] && [ -n "$(tail -c 1 "$j")" ]; then printf '\\n' >> "$j"; fi
  printf '%s' "$2" >> "$j"
  sync "$j"
fi
if [ "$3" = set ]; then
  if [ -z "$4" ]; then rm -f "$d/handlers.pending"
  else
    printf '%s' "$4" > "$d/handlers.pending.new"
    sync "$d/handlers.pending.new"
    mv -f "$d/handlers.pending.new" "$d/handlers.pending"
  fi
  sync "$d"
fi
"""

Pending = tuple[str, str]  # (role, handler name)


@dataclass(frozen=True)
class Entry:
    """One journal line."""

    run: str
    by: str
    role: str
    kind: str  # "step" or "handler"
    step: str
    summary: str

    def line(self) -> str:
        data = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **self.__dict__}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def parse_pending(text: str) -> list[Pending]:
    """handlers.pending -> [(role, name)], in file order, without duplicates."""
    out: list[Pending] = []
    for raw in text.splitlines():
        role, sep, name = raw.partition("\t")
        if sep and name and (role, name) not in out:
            out.append((role, name))
    return out


def format_pending(entries: Iterable[Pending]) -> str:
    return "".join(f"{role}\t{name}\n" for role, name in dict.fromkeys(entries))


# Read with the shell's own `read`, in the batch's own shell (engine/inline.py): no process start.
# A last line without its newline (torn by a crash) is printed too; parse_pending judges it.
# Sent without its file's last newline, as before it was a file: the batch recorded on a target keeps its digest.
_PENDING = inline.mark(shell.script("gpunode.engine", "pending_probe.sh").rstrip("\n"))


def pending_probe(state_dir: str) -> list[str]:
    """argv for the batched probe: the pending handlers left by earlier runs."""
    return ["sh", "-c", _PENDING, "sh", state_dir]


def update(
    target: Transport,
    state_dir: str,
    run_id: str,
    *,
    entries: Iterable[Entry] = (),
    pending: Iterable[Pending] | None = None,
) -> None:
    """Append journal lines and/or replace the pending set, in one command, only while
    lock.owner still names run_id (else LockError)."""
    text = "".join(e.line() for e in entries)
    mode = "keep" if pending is None else "set"
    body = format_pending(pending) if pending is not None else ""
    if not text and pending is None:
        return
    result = target.script(_UPDATE, state_dir, text, mode, body, run_id)
    if lost(result.exit_code, result.stdout):
        raise lost_error(target.name, state_dir)
    result.check(f"recording the journal in {state_dir}")


def read(target: Transport, state_dir: str, notes: list[str] | None = None) -> list[dict]:
    """Every journal line of the target, oldest first ([] when there is no journal).

    A line that is not a JSON object (torn by a crash mid-append) is read past; a sentence
    saying so goes to `notes` when given.
    """
    result = target.run(["sh", "-c", 'cat "$1/journal.jsonl" 2>/dev/null; exit 0', "sh", state_dir],
                        check=True, what="reading the journal")
    entries = []
    for number, line in enumerate(result.stdout.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            if notes is not None:
                notes.append(f"{state_dir}/{JOURNAL} line {number} is not a whole entry "
                             f"(torn by a crash?), read past it: {line[:80]!r}")
            continue
        entries.append(entry)
    return entries
