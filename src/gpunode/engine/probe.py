"""Batched probes: every step's probe argv in ONE shell script, one round trip.

Each probe runs with stdin from /dev/null and stderr folded into stdout,
between marker lines that carry a random nonce (so no file content can fake
one) and the probe's exit code. The newline printed before the end marker is
ours and is removed again, so each step gets its output byte for byte.

A probe that is a shell script (`sh -c SCRIPT sh ARGS...`) runs as a subshell of the
batch, `( set -- ARGS; SCRIPT )`, not as a new `sh` process: the same script, its own
positional parameters and variables, its `exit` ends only itself, and no process start.
The scripts engine/inline.py marks (the passes, the reused answers, the pending handlers)
run as a function call instead: not even a fork.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence

from gpunode import marked, shell
from gpunode.engine import inline, passes
from gpunode.errors import FactError, tail
from gpunode.steps.base import Probe
from gpunode.transport.base import Transport, probe_deadline


def command(argv: Sequence[str]) -> str:
    """Shell text that runs one probe inside the batch: a subshell for `sh -c` scripts, a function
    call in the batch's own shell for those engine/inline.py knows to be safe there."""
    if len(argv) >= 3 and argv[0] == "sh" and argv[1] == "-c":
        if argv[2] in inline.SAFE:
            return f"gn_probe() {{\n{argv[2]}\n}}\ngn_probe {shell.join(argv[4:])}"
        return f"( set -- {shell.join(argv[4:])}\n{argv[2]}\n)"
    return shell.join(argv)


# The C locale for every program a batch starts: with the container's C.UTF-8 each one (stat,
# grep, find, bash...) opens and maps ~13 files of /usr/lib/locale/C.utf8 first, ~0.25 ms a
# program in container 200. No probe reads text as characters (GNU grep -a '' passes bytes, stat
# and find print names as they are, Python turns on its UTF-8 mode under C), so the answers are the same.
LOCALE = "LC_ALL=C; export LC_ALL\n"


def build(probes: Sequence[Sequence[str]], nonce: str) -> str:
    parts = [LOCALE]
    for i, argv in enumerate(probes):
        parts.append(
            f"printf '%s begin {i}\\n' {nonce}\n"
            f"{command(argv)} </dev/null 2>&1\n"
            f"printf '\\n%s end {i} %d\\n' {nonce} $?\n"
        )
    return "".join(parts)


def parse(output: str, count: int, nonce: str) -> list[Probe]:
    found: dict[int, Probe] = {}
    for index, body, rc in blocks(output, nonce):
        found[index] = Probe(rc, body)
    missing = [i for i in range(count) if i not in found]
    if missing:
        raise FactError(
            f"the batched probe ended early: no result for probe {missing[0]} of {count}",
            evidence=tail(output),
            hint="the target may have run out of memory or the connection dropped; re-run",
        )
    return [found[i] for i in range(count)]


def blocks(output: str, nonce: str) -> Iterator[tuple[int, str, int]]:
    """(index, output, exit code) of each probe, between its `NONCE begin I` line and the first
    `NONCE end I RC` line after it."""
    for b in marked.blocks(output, f"{nonce} begin ", lambda i: f"{nonce} end {i} ", key_ok=marked.decimal):
        yield int(b.key), b.body, int(b.code)


#: The batch rides in the lock shell's argv when it is at most this long (Linux refuses one
#: argument over 128 KiB, and quoting for ssh and pct grows it); a longer one goes on stdin.
INLINE_LIMIT = 96 * 1024


def new_nonce() -> str:
    return "gpunode-" + secrets.token_hex(8)


def parse_for(target: str, output: str, count: int, nonce: str) -> list[Probe]:
    """parse(), with the target named in the error."""
    try:
        return parse(output, count, nonce)
    except FactError as exc:
        exc.target = target
        raise


def run_batch(target: Transport, probes: Sequence[passes.Item]) -> list[Probe]:
    """Run all probes in one command (the steps' shared reads in one pass each, engine/passes.py);
    one Probe per item, in order."""
    folded = passes.fold(probes)
    return fill(target, folded, _plain_batch(target, folded.argvs))


def fill(target: Transport, folded: passes.Folded, results: Sequence[Probe]) -> list[Probe]:
    """The original probes' results from the folded ones; those a pass could not answer exactly
    run as their own probes, in one more round trip (only when something differs)."""
    got = folded.unfold(results)
    missing = [i for i, p in enumerate(got) if p is None]
    if missing:
        for i, p in zip(missing, _plain_batch(target, [folded.originals[i] for i in missing]), strict=True):
            got[i] = p
    return [p for p in got if p is not None]


def _plain_batch(target: Transport, probes: Sequence[Sequence[str]]) -> list[Probe]:
    if not probes:
        return []
    nonce = new_nonce()
    # The script goes in on stdin: as one argv word it would hit Linux's
    # 128 KiB limit per argument on runs with many steps.
    result = target.run(["sh", "-s"], stdin=build(probes, nonce).encode(), timeout=probe_deadline())
    try:
        return parse(result.stdout, len(probes), nonce)
    except FactError as exc:
        exc.target = target.name
        exc.evidence = tail(result.stdout + result.stderr)
        raise


def run_one(target: Transport, argv: Sequence[str]) -> Probe:
    """One probe on its own, with the same folding as the batch (used for re-probes)."""
    result = target.run(shell.sh('"$@" </dev/null 2>&1', *argv), timeout=probe_deadline())
    return Probe(result.exit_code, result.stdout)
