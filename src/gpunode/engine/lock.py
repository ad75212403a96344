"""The per-target lock: one applying run at a time, and the refused one is told who.

A small shell on the target takes `flock` on <state_dir>/lock and then just
reads its stdin. The lock lives exactly as long as that shell: releasing
closes its stdin; a crashed run or a dropped SSH connection closes it too, so
a dead run never leaves the target locked. The holder writes who it is next
to the lock (lock.owner: "<pid on target> <owner json>", mode 0600). The owner
record says who, where, when and which task, never the command line's values:
those can be secrets (`--set hf_token=...`), and the record travels in the lock
shell's argv (`ps` on the target and the Proxmox host) and into a second
operator's "locked by" error.

Check runs take the lock shared and write nothing: they may run side by side,
but never while an applying run holds it, and they do not create the state
folder. A run that hangs with its connection half-open can be ended with
`break_lock`, which only kills a process that is one of our lock shells.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import secrets
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from gpunode.errors import LockError
from gpunode.transport.base import Held, Result, Sink, Stdin, Transport

# The first line of the lock shell is a marker that break_lock looks for in
# /proc/<pid>/cmdline before it kills anything.
# $3, when given, is the run's batched probe: it runs right after the lock is taken and its output
# follows the first line as it is, up to the line $5 (random per run, so no output can end it
# early), so lock and probe cost one round trip together. The newline before $5 is ours.
# gn_end PID ends PID and every process it started (found through /proc: a lock shell has no job
# control, and in a container its process group is the host's). Shell builtins only: it runs in
# the lock shell, whose no-op must start no program (tests/lab/test_noop_processes.py).
# gn_st PID sets gn_t to its start time (a pid alone may have been reused).
_STAT = """gn_st() { { read -r gn_l < "/proc/$1/stat"; } 2>/dev/null || return 1; set -- ${gn_l##*) }; gn_t=${20}; }
"""
_END = _STAT + """gn_end() { gn_all=$1 gn_new=" $1 "
  while [ "$gn_new" != " " ]; do gn_next=" "
    for gn_s in /proc/[0-9]*/stat; do
      { read -r gn_l < "$gn_s"; } 2>/dev/null || continue
      set -- ${gn_l##*) }
      case $gn_new in *" $2 "*) gn_s=${gn_s#/proc/}; gn_next="$gn_next${gn_s%/stat} ";; esac
    done
    gn_all="$gn_next$gn_all" gn_new=$gn_next
  done
  # The deepest first, PID last: whoever waits for PID (the lock shell) goes on only once all are hit.
  kill -KILL $gn_all 2>/dev/null; }
# The commands of a run (Fenced) that are still going when its lock shell's stdin closes (released,
# or its controller went away), or that a killed lock shell left: ended before the lock goes.
# A record whose process has another start time is stale (a reboot): dropped, nothing killed.
gn_reap() { for gn_f in "$d"/run/*; do [ -f "$gn_f" ] || continue
  read -r gn_p gn_w < "$gn_f"; gn_st "$gn_p" && [ "$gn_t" = "$gn_w" ] && gn_end "$gn_p"; rm -f "$gn_f"; done; }
"""

_PROBED = _END + """exec 8<&0
# The probe runs beside a watcher that ends it, with all it started, when stdin closes first: the
# controller's deadline (Held) ran out, or the controller went away. A recorded batch that ran into
# that is dropped, so the next run probes afresh. Neither holds the lock's descriptor 9: a process
# left behind never keeps the lock.
out() { echo "$1"; [ -n "$P" ] || return 0
( eval "$P" ) </dev/null 8<&- 9>&- 2>&1 & gn_p=$!
( while read -r _; do :; done; rm -f "$d"/probe-*.sh; gn_end "$gn_p" ) <&8 >/dev/null 2>&1 9>&- & gn_w=$!
wait "$gn_p"; kill "$gn_w" 2>/dev/null
printf '\\n%s\\n' "$E"; }
P=$3 E=$5 GN_STATE=$1
# flock and dd, the facts and the batch load no locale (engine/probe.py, LOCALE).
LC_ALL=C; export LC_ALL
# A run that released the lock does not wait for its lock shell to end (transport/ssh.py): a
# holder on its way out is waited for, a second at most, before the lock counts as taken.
# (flock -w is not in busybox; the flock started by timeout locks the shell's own fd 9.)
take() { flock -n "$1" 9 || timeout 1 flock "$1" 9; }
"""

_EXCLUSIVE = """# gpunode-lock
d=$1
""" + _PROBED + """umask 077
# $4=fresh (else "-"): a target without the state folder gets the probe without the lock and nothing is
# created, so that a run its facts refuse leaves the target as it was.
if [ ! -d "$d" ] && [ "$4" = fresh ]; then out FRESH; exit 0; fi
[ -d "$d" ] || mkdir -p "$d" 2>/dev/null || { echo "ERROR cannot create $d"; exit 0; }
exec 9>>"$d/lock" || { echo "ERROR cannot open $d/lock"; exit 0; }
if ! take -x; then printf 'BUSY %s\\n' "$(head -n 1 "$d/lock.owner" 2>/dev/null)"; exit 0; fi
# Written in place (one write, no mv): a reader that finds it empty takes it for "no owner".
printf '%s %s\\n' "$$" "$2" > "$d/lock.owner"
# Only a probe under this exclusive lock may update bookkeeping in $d (the facts cache).
GN_EXCLUSIVE=1
gn_reap
out LOCKED
while read -r _; do :; done
gn_reap
# Emptied, not removed: a builtin, and done before the lock goes, so the next holder's record stays.
: > "$d/lock.owner"
"""

_SHARED = """# gpunode-lock (check)
d=$1
""" + _PROBED + """[ -e "$d/lock" ] || { out FREE; exit 0; }
exec 9<"$d/lock" || { echo "ERROR cannot open $d/lock"; exit 0; }
if ! take -s; then printf 'BUSY %s\\n' "$(head -n 1 "$d/lock.owner" 2>/dev/null)"; exit 0; fi
out LOCKED
while read -r _; do :; done
"""

# Ends whatever holds the lock: every process with the lock file open (a lock shell, a check's lock
# shell, a process that inherited its descriptor, something a user started under flock), with all
# it started; each is named on a HOLDER line first: its program's name, never its command line (an
# older gpunode's lock shell had secrets there), and whether it is one of our lock shells.
_BREAK = """d=$1
[ -e "$d/lock" ] || { echo NOLOCK; exit 0; }
if flock -n -x "$d/lock" true; then echo FREE; exit 0; fi
""" + _END + """pid=; rest=
[ -r "$d/lock.owner" ] && read -r pid rest < "$d/lock.owner"
holders=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "$d/lock" 2>/dev/null | cut -d/ -f3 | sort -un)
for h in $holders; do
  comm=$(cat "/proc/$h/comm" 2>/dev/null)
  grep -q gpunode-lock "/proc/$h/cmdline" 2>/dev/null && comm="$comm, a gpunode lock shell"
  printf 'HOLDER %s %s\\n' "$h" "$comm"
done
# Named first, ended after: a holder may be another's child, gone with it.
for h in $holders; do gn_end "$h"; done
# Opened only now: this shell's children above would have been found holding it.
exec 9<"$d/lock"
flock -w 5 -x 9 || { echo "STUCK $holders"; exit 0; }
rm -f "$d/lock.owner"
echo "BROKEN $pid $rest"
"""


# A command of an applying run, run by Fenced: it registers itself under $d/run (its pid and start
# time) while it runs, so that the lock shell ends it, with all it started, when the run goes away
# (gn_reap); the lock is let go only after that. It runs "$@" as its child, never by exec.
_FENCE = """# gpunode-fence
d=$1; shift
""" + _STAT + """if gn_st $$; then { [ -d "$d/run" ] || mkdir -p "$d/run"; } && echo "$$ $gn_t" > "$d/run/$$"; fi
# A missing program is reported as env reports it, which pct's transport turns into its own error.
command -v "$1" >/dev/null || { echo "env: '$1': No such file or directory" >&2; rm -f "$d/run/$$"; exit 127; }
"$@"; gn_rc=$?
rm -f "$d/run/$$"
exit $gn_rc
"""


class Fenced(Transport):
    """The transport an applying run's steps and handlers use while it holds the lock: every
    command registers itself for the lock shell (_FENCE), so a run's commands end with the run
    (a killed controller's installer does not go on beside the next run's)."""

    def __init__(self, inner: Transport, state_dir: str):
        self.inner = inner
        self.name = inner.name
        self.state_dir = state_dir

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: Sink | None, timeout: float | None):
        return self.inner._exec(["sh", "-c", _FENCE, "sh", self.state_dir, *argv], stdin, sink, timeout)

    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        return self.inner.hold(argv, until)

    def _raise_for_transport(self, result: Result) -> None:
        self.inner._raise_for_transport(result)

    # Transfers go to the wrapped transport's own methods (pct push, SFTP), as Metered's do.
    def write_file(self, dest: str, data: bytes | BinaryIO, *, mode: int = 0o644, owner: str | None = None,
                   sha256: str | None = None) -> None:
        self.inner.write_file(dest, data, mode=mode, owner=owner, sha256=sha256)

    def read_file(self, path: str, sink: Sink | None = None) -> bytes:
        return self.inner.read_file(path, sink)

    def put_tree(self, local_dir: Path, dest_dir: str) -> None:
        self.inner.put_tree(local_dir, dest_dir)

    def get_tree(self, src_dir: str, local_dir: Path) -> None:
        self.inner.get_tree(src_dir, local_dir)


#: Exit code and line of a command that refused to act because this run lost its lock.
LOST_EXIT = 75
LOST_LINE = "gpunode: this run no longer holds the lock"


def guard(dir_ref: str, run_ref: str) -> str:
    """Shell text that stops a command (exit LOST_EXIT) unless lock.owner still names this run.

    The lock shell empties lock.owner when its connection ends and a new holder
    overwrites it, so this catches a run that reconnected after a drop and
    would otherwise go on changing the target without the lock.
    """
    return (f'grep -qF "\\"run_id\\":\\"{run_ref}\\"" "{dir_ref}/lock.owner" 2>/dev/null '
            f'|| {{ echo "{LOST_LINE}"; exit {LOST_EXIT}; }}')


def lost(result_code: int, output: str) -> bool:
    return result_code == LOST_EXIT and LOST_LINE in output


def lost_error(target: str, state_dir: str) -> LockError:
    return LockError(
        f"this run lost the lock on {target} ({state_dir}/lock): its connection dropped or the lock was "
        "broken; stopped before changing anything else",
        target=target,
        hint="re-run: finished steps are no-ops, pending handlers were kept, no file is ever half-written",
    )


_TASK_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,40}")


def task_of(argv: list[str]) -> str:
    """'inv provision' from ['/x/.venv/bin/inv', 'provision', '--set', 'hf_token=...']: the program
    and the task names before the first option, never an option or its value."""
    words = [os.path.basename(argv[0]) if argv else "?"]
    for word in argv[1:4]:
        if not _TASK_WORD.fullmatch(word):
            break
        words.append(word)
    return " ".join(words)


@dataclass(frozen=True)
class Owner:
    """Who runs gpunode (user, workstation, pid, start time, task, run id): written next to the
    lock and, as user@workstation, into every journal line. No command-line values."""

    user: str
    workstation: str
    pid: int
    started: str
    task: str
    run_id: str

    @classmethod
    def current(cls, run_id: str, task: str | None = None) -> Owner:
        return cls(
            user=getpass.getuser(),
            workstation=socket.gethostname(),
            pid=os.getpid(),
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            task=task if task is not None else task_of(sys.argv),
            run_id=run_id,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def parse(cls, line: str) -> tuple[int | None, Owner | None]:
        """'<pid on target> <json>' -> (pid, Owner); (None, None) when unreadable."""
        pid_text, _, rest = line.strip().partition(" ")
        try:
            data = json.loads(rest)
            if isinstance(data, dict) and "command" in data and "task" not in data:
                # Written by an older gpunode: its full command line may hold secrets.
                data["task"] = task_of(str(data.pop("command")).split())
            return int(pid_text), cls(**data)
        except (ValueError, TypeError):
            return None, None

    def describe(self) -> str:
        return (f"{self.user}@{self.workstation} (pid {self.pid}, run {self.run_id}, "
                f"since {self.started}): {self.task}")


class TargetLock:
    """A held lock; release() is safe to call twice. `probed`: the output of the probe that
    acquire() ran under the lock in the same round trip ("" when none was given)."""

    def __init__(self, held: Held | None, probed: str = "", fresh: bool = False):
        self._held = held
        self.probed = probed
        #: acquire(fresh=True) on a target without the state folder: probed, nothing locked
        self.fresh = fresh

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            # A dead connection has released the lock already; nothing left to do then.
            # Not waiting for the lock shell to end (~1.3 ms of every no-op over SSH): it ends on the
            # EOF alone, and the next run's lock shell waits a moment for one on its way out.
            with contextlib.suppress(Exception):
                held.release(wait=False)

    def __enter__(self) -> TargetLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(target: Transport, state_dir: str, owner: Owner, *, shared: bool = False,
            probe: str = "", fresh: bool = False) -> TargetLock:
    """Take the target's lock (shared for check runs) or raise LockError naming its holder.

    probe: shell text run on the target once the lock is held (in the same round trip); its
    stdout and stderr are in the returned lock's `probed`. fresh: where the state folder does
    not exist yet, run the probe without creating it or taking the lock (`fresh` is then set).
    """
    script = _SHARED if shared else _EXCLUSIVE
    end = "gpunode-end-" + secrets.token_hex(8)
    held = target.hold(["sh", "-c", script, "sh", state_dir, owner.to_json(), probe, "fresh" if fresh else "-", end],
                       until=end if probe else "")
    word, _, rest = held.first_line.partition(" ")
    # The body lacks its last newline (ours) only when the end line came; else the probe's
    # parser says that it ended early, with the evidence.
    body = held.body[:-1] if held.body.endswith("\n") else held.body
    probed = body if probe and word in ("LOCKED", "FREE", "FRESH") else ""
    if word == "LOCKED":
        return TargetLock(held, probed)
    held.release()
    if word in ("FREE", "FRESH"):
        return TargetLock(None, probed, fresh=word == "FRESH")
    if word == "BUSY":
        pid, holder = Owner.parse(rest)
        who = holder.describe() if holder else "a check run or a run that left no owner record"
        where = f" (process {pid} on the target)" if pid else ""
        raise LockError(
            f"{target.name} is locked by another gpunode run: {who}{where}",
            target=target.name,
            # The parsed record only: an older gpunode's raw line may hold a command line's secrets.
            evidence="" if holder else f"{state_dir}/lock.owner: {'(unreadable)' if rest else '(empty)'}",
            hint="wait for that run to finish; a run that died releases the lock by itself. If it hangs, "
            "`inv unlock` ends whatever holds the lock, with all it started, and names it",
        )
    if not held.first_line:
        # Said nothing: most often the target is not there (pct: no such container, or stopped).
        # A plain command gets the transport's own error for that; one more round trip, on failure only.
        target.run(["true"])
    raise LockError(
        f"could not take the lock {state_dir}/lock on {target.name}",
        target=target.name,
        evidence=held.first_line or "(the lock shell said nothing)",
        hint=f"check that {state_dir} is writable and that flock(1) (util-linux) is installed",
    )


def break_lock(target: Transport, state_dir: str) -> str:
    """End whatever holds the target's lock, with all it started; return a sentence naming it."""
    result = target.script(_BREAK, state_dir, check=True, what=f"breaking the lock in {state_dir}")
    lines = result.stdout.strip().splitlines()
    holders = [line.split(" ", 2)[1:] for line in lines if line.startswith("HOLDER ")]
    named = ", ".join(f"process {h[0]} ({h[1].strip() if len(h) > 1 else '?'})" for h in holders)
    word, _, rest = (lines[-1] if lines else "").partition(" ")
    if word in ("NOLOCK", "FREE"):
        return f"{target.name}: {state_dir}/lock is not held; nothing to break"
    if word == "BROKEN":
        pid, _, owner_json = rest.partition(" ")
        _, holder = Owner.parse(f"{pid} {owner_json}")
        who = f" (run of {holder.describe()})" if holder else ""
        return f"{target.name}: ended lock holder {named or 'process'}{who}; the lock is free"
    raise LockError(
        f"cannot break the lock {state_dir}/lock on {target.name}: "
        + (f"{named} did not let go" if named else "no process was found holding it"),
        target=target.name,
        evidence=result.stdout.strip(),
        hint=f"a process in uninterruptible sleep (a hung mount) cannot be ended; see `fuser -v {state_dir}/lock` "
        "on the target",
    )
