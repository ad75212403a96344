"""Facts, lock and step probes in ONE round trip, although the steps depend on the facts.

The steps' probes come from the plan, and the plan from the facts, so they cannot be
known before the facts arrive. The last applying run therefore records its batched probe
on the target (<state_dir>/probe-<key>.sh, one per set of roles; the batch carries no
nonce of its own, it reads $GN), and the lock shell runs, after taking the lock:

    the facts probe, then the recorded batch (when there is one), with this run's nonce

Back here the facts are parsed, the plan resolved and the steps built; when their batch is
the recorded one (same digest), its output is this run's probe. Otherwise (first run, new
plan, changed inventory) a second round trip runs the new batch and, for an applying run,
records it, still under the lock. A run that applied a step that may change the facts reads
them again at its end and records the batch they make (record_next), so that the no-op after it
finds its batch.
Facts themselves are probed on every run: they can change without gpunode knowing (a driver
update, a model copied in); only the slow ones whose source files show no change in a stat
are reused (facts/cache.py, also in the state folder).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpunode import shell
from gpunode.engine import lock, passes, probe
from gpunode.engine.role import RolePlan
from gpunode.transport.base import Transport, probe_deadline

_NONCE_VAR = '"$GN"'


@dataclass
class Prelude:
    """What runs before the steps are known: `script(nonce)` is shell text that the lock shell
    runs in a subshell (the facts probe, in a command substitution); `build(output, nonce)` turns
    its output into the roles to run (raising GpunodeError for a target or input that must be
    refused). `key` names the recorded batch."""

    key: str
    script: Callable[[str], str]
    build: Callable[[str, str], Sequence[RolePlan]]


def key_for(role_names: Sequence[str]) -> str:
    return hashlib.sha256(",".join(role_names).encode()).hexdigest()[:16]


def batch(folded: passes.Folded) -> tuple[str, str]:
    """The nonce-free batch and its digest (what is recorded and compared)."""
    body = probe.build(folded.argvs, _NONCE_VAR)
    return body, hashlib.sha256(body.encode()).hexdigest()


def path(state_dir: str, key: str) -> str:
    return f"{state_dir}/probe-{key}.sh"


def first_trip(prelude: Prelude, nonce: str, state_dir_ref: str = "$d") -> str:
    """Shell text run by the lock shell (which has the state folder in $d): the facts, then the
    recorded batch, announced with its digest.

    The two do not depend on each other, so they run side by side: the batch writes into a pipe
    (the kernel holds 64 KiB of it; past that it waits) while the facts print into a command
    substitution; then the facts' output is printed and `dd` passes the batch's output on after
    it, so the answer reads as if they had run one after the other. A no-op waits on the target,
    which has idle cores: in container 200 this took the lock shell from ~33 to ~23 ms.

    `dd obs=1M` holds the batch's output and writes it at the end in one piece: the shell's
    builtins write every line on its own, and sshd sent each write as an SSH packet (~66 for a full
    provision), each one decrypted, MAC-checked and queued by paramiko in Python: 10.5 -> 6.2 ms of
    local CPU per full no-op. The facts come out in one printf for the same reason, and so take
    no `cat` (each program started costs ~0.9 ms in a container, a fork ~0.25 ms; this trip only:
    small answers gain nothing)."""
    recorded_batch = (f"GN={shell.quote(nonce)}; f=\"{state_dir_ref}/probe-{prelude.key}.sh\"\n"
                      + 'if [ -r "$f" ] && read -r _ _ id < "$f"; then printf \'%s recorded %s\\n\' "$GN" "$id"; '
                      + '. "$f"; fi\n')
    # $( ) drops the output's last newlines: it ends on a marker line, whose newline printf puts back.
    return ("{ " + recorded_batch + "} </dev/null 2>&1 | {\ngn_facts=$(\n" + prelude.script(nonce).rstrip("\n")
            + "\n)\nprintf '%s\\n' \"$gn_facts\"\nexec dd obs=1M 2>/dev/null; }\n")


# One line: a nonce whose word differs is skipped, and a single line cannot hide another, so one
# pattern compiled once serves every run.
_RECORDED = re.compile(r"^(\S+) recorded ([0-9a-f]{64})$", re.M)


def recorded_digest(output: str, nonce: str) -> str | None:
    return next((m.group(2) for m in _RECORDED.finditer(output) if m.group(1) == nonce), None)


# Records the batch on stdin (atomically) as probe-$3.sh, under this run's lock.
_STORE = lock.guard("$1", "$2") + """
f="$1/probe-$3.sh"
cat > "$f.new" && mv -f "$f.new" "$f" || { echo "gpunode: cannot record $f"; exit 1; }
"""

# What a probe sees in the lock shell (engine/lock.py): the state folder as $d and $GN_STATE, and
# GN_EXCLUSIVE, which lets it store what it reuses (the facts cache, engine/reuse.py). Commands of
# a later round trip set the same, once the guard has said that this run still holds the lock.
_UNDER_LOCK = "d=$1 GN_STATE=$1 GN_EXCLUSIVE=1\n"

# Second round trip of an applying run: run the new batch, then record it. Recorded only once it
# has answered: a batch that hangs (its deadline ends it) is never replayed by a later run.
_RECORD = lock.guard("$1", "$2") + """
f="$1/probe-$3.sh"
cat > "$f.new" || { echo "gpunode: cannot record $f"; exit 1; }
""" + _UNDER_LOCK + """GN=$4
. "$f.new"
mv -f "$f.new" "$f"
"""

# The facts again, at the end of an applying run (record_next).
_FACTS = lock.guard("$1", "$2") + "\nexec </dev/null 2>&1\n" + _UNDER_LOCK


def results(target: Transport, output: str, nonce: str, argvs: Sequence[passes.Item], *, key: str,
            state_dir: str, run_id: str, record: bool) -> tuple[list[probe.Probe], str]:
    """This run's probe results and its batch's digest: the results from the first trip's output
    when the recorded batch is this run's, else from a second round trip (which records the batch
    when `record`)."""
    folded = passes.fold(argvs)
    body, digest = batch(folded)
    if recorded_digest(output, nonce) == digest:
        return probe.fill(target, folded, probe.parse_for(target.name, output, len(folded.argvs), nonce)), digest
    if not record:
        return probe.run_batch(target, argvs), digest
    text = f"# gpunode-probe {digest}\n{body}"
    result = target.run(shell.sh(_RECORD, state_dir, run_id, key, nonce), stdin=text.encode(),
                        timeout=probe_deadline())
    if lock.lost(result.exit_code, result.stdout):
        raise lock.lost_error(target.name, state_dir)
    return probe.fill(target, folded, probe.parse_for(target.name, result.stdout, len(folded.argvs), nonce)), digest


def record_next(target: Transport, prelude: Prelude, argvs: Callable[[Sequence[RolePlan]], Sequence[passes.Item]], *,
                state_dir: str, run_id: str, recorded: str) -> bool:
    """After a run that applied a step that may change the facts (Step.changes_facts): read the
    facts again and record the batch of the plan they make, so that the next run, a no-op, finds
    its batch recorded and costs one round trip.

    The batch recorded before applying was made from the facts as they were then, and applying
    changes some of them (a venv made, weights staged): without this, the first no-op after every
    change paid a second round trip. Two round trips here instead, in a run that already made
    several, or one when the plan's batch is still `recorded` (the digest of the one recorded on
    the target: a change that left the facts as they were). Whatever fails (a lost lock, facts
    the plan refuses) leaves the old record: the next run then probes twice, as it would have.
    True when a batch was recorded."""
    nonce = probe.new_nonce()
    facts = target.run(shell.sh(_FACTS + prelude.script(nonce), state_dir, run_id), timeout=probe_deadline())
    if lock.lost(facts.exit_code, facts.stdout):
        return False
    body, digest = batch(passes.fold(argvs(prelude.build(facts.stdout, nonce))))
    if digest == recorded:
        return False
    stored = target.run(shell.sh(_STORE, state_dir, run_id, prelude.key),
                        stdin=f"# gpunode-probe {digest}\n{body}".encode())
    return stored.exit_code == 0
