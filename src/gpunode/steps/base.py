"""The step contract: probe, check, apply.

A step is one idempotent resource (a package set, a file, a unit). The engine
runs every step's `probe` argv in ONE batched script per target (or what the step's
`batched()` says instead: a share of a Pass, one command that reads for many steps),
hands each step its own output, and asks `check` for an Outcome: a Change (what would be
done, with a diff for files) or a NoChange with a sentence saying why nothing
is needed. Only then, and only outside check mode, does it call `apply`.

A step whose apply is a fixed list of commands says so as data (`commands()`): the
default `apply` runs them in order, `inv provision --commands` prints them, and tests pin
them. A command watched as it runs (apt's progress) is still data: its apply hands
`Command.run` a sink (`watched`, `run_all`). A step whose commands depend on what earlier ones
answered (a readiness wait) or that moves a tree from the workstation keeps `apply` as code and
returns None.

Steps never print, never know about roles or inventory, and build argv lists
only (gpunode.shell quotes them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from gpunode import shell
from gpunode.errors import StepError, tail
from gpunode.transport.base import Result, Sink, Transport


@dataclass(frozen=True)
class Probe:
    """A step's probe output: its exit code and combined stdout."""

    exit_code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def lines(self) -> list[str]:
        return self.output.splitlines()


#: Scripts that may run in the batch's own shell as a function call, not a subshell: no exit,
#: return, cd, exec, trap, eval or set of options, and every variable they assign named gn_*
#: (engine/inline.py says why; tests/unit/test_engine_inline.py checks each one).
INLINE: set[str] = set()


def inline(script: str) -> str:
    """The script, known from now on to be safe to run in the batch's own shell."""
    INLINE.add(script)
    return script


@dataclass(frozen=True, eq=False)
class Pass:
    """One command in the batch that reads, for every step that asks, a part of what its own probe
    reads: one `stat` over every path, one `systemctl show` over every unit. Steps ask with an
    argument (a path, a unit name); `command` gets each argument once, in the order first asked,
    and `read` turns its output, once, into the answer every step that asked is given (None when
    the output cannot be read: each of those steps then runs its own probe). `rank` orders the
    passes in the batch (the shipped ones take 10-40)."""

    name: str
    command: Callable[[list[Hashable]], list[str]]
    read: Callable[[Probe, list[Hashable]], Any]
    rank: int = 100


#: (its own output in the batch, or None when it runs nothing of its own; each asked pass's answer,
#: in the order asked) -> the output its own probe would have printed, or None where that cannot be
#: said exactly (the step's own probe then runs, in one more round trip, only then)
Answer = Callable[[Probe | None, tuple[Any, ...]], Probe | None]


@dataclass(frozen=True)
class Batched:
    """How a step's probe takes part in the one batched round trip (Step.batched).

    `probe` is its own probe (Step.probe), run as it is for a re-probe and wherever the batch
    cannot answer exactly. In the batch it runs `own` (its probe, or what is left of it once the
    passes read the rest; empty: nothing) and asks its share of the passes (`asks`); `answer`
    makes from those what `probe` would have printed, so that the step's check stays the same
    pure function. Without asks, `own`'s output is the step's answer as it is."""

    probe: tuple[str, ...]
    own: tuple[str, ...] = ()
    asks: tuple[tuple[Pass, Hashable], ...] = ()
    answer: Answer | None = None

    @classmethod
    def alone(cls, argv: Sequence[str], batched: Sequence[str] | None = None) -> Batched:
        """A probe that shares no pass: `argv`, run in the batch as it is or as `batched` (a shell
        that reuses its last answer: the same output)."""
        return cls(tuple(argv), tuple(argv if batched is None else batched))


@dataclass(frozen=True)
class Change:
    """What applying the step will change. `diff` is a unified diff for files."""

    summary: str
    diff: str = ""


@dataclass(frozen=True)
class NoChange:
    """Nothing to do, and why, in one sentence a user can read."""

    reason: str


Outcome = Change | NoChange


@dataclass(frozen=True)
class Command:
    """One command of an apply, as data: argv, what goes to its stdin, and how its failure reads.

    A non-zero exit raises. An exit code listed in `exits` (code, message, hint) means something
    of its own and reads as that message. Otherwise, with `failure` (or `evidence`): StepError(
    "<failure, or '<what> failed'> (exit code N)") with the tail of its output and `hint`; with
    none of the three: the transport's CommandError naming `what`. `evidence` is a command run
    only after a failure, whose output a user needs first (a unit's status). `hidden` are argv
    positions shown as "<hidden>" (a sensitive file's sha256: a hash of a short token can be
    brute-forced)."""

    argv: tuple[str, ...]
    what: str
    stdin: bytes | None = None
    failure: str = ""
    hint: str = ""
    hidden: tuple[int, ...] = ()
    exits: tuple[tuple[int, str, str], ...] = ()
    evidence: tuple[str, ...] = ()
    timeout: float | None = None
    #: its stdout is progress (an installer's lines, a copy's @@progress): run_all streams it into the sink
    watched: bool = False
    #: a script's effect as the plain commands it runs (`systemctl start x`), shown in its place by
    #: --commands: the script around them only makes them safe to repeat and their failures readable
    reads_as: str = ""

    def shown(self) -> str:
        """The command as a shell line a person can read and run; stdin as its size."""
        if self.reads_as:
            return self.reads_as + (f"  # stdin: {len(self.stdin)} bytes" if self.stdin is not None else "")
        line = " ".join("<hidden>" if i in self.hidden else shell.quote(w) for i, w in enumerate(self.argv))
        return line + (f"  # stdin: {len(self.stdin)} bytes" if self.stdin is not None else "")

    def run(self, target: Transport, sink: Watcher | None = None) -> Result:
        """Run it; with `sink`, its stdout streams there as it comes (an installer's progress)."""
        # Any way of its own to read a failure means the transport's plain error would lose it.
        own = bool(self.failure or self.exits or self.evidence)
        result = target.run(self.argv, stdin=self.stdin, sink=sink, timeout=self.timeout, check=not own,
                            what=self.what)
        if sink is not None:
            sink.flush()
        if result.ok:
            return result
        output = (result.stderr or sink.text) if sink is not None else result.stdout + result.stderr
        message, hint = next(((m, h) for code, m, h in self.exits if code == result.exit_code),
                             (f"{self.failure or self.what + ' failed'} (exit code {result.exit_code})", self.hint))
        evidence = tail(output, 30)
        if self.evidence:
            more = target.run(self.evidence)
            evidence += f"\n--- {shell.join(self.evidence)}:\n{tail(more.stdout + more.stderr, 30)}"
        raise StepError(message, target=target.name, evidence=evidence.strip(), hint=hint)


def run_all(commands: Sequence[Command], target: Transport, sink: Watcher | None = None) -> None:
    """Run commands in order (a step's apply, a handler's action); the watched ones stream their
    stdout into `sink`."""
    for command in commands:
        command.run(target, sink if command.watched else None)


class Watcher(Sink, Protocol):
    """A sink that watches a command's stdout as it runs (steps/progress.py): flushed when the
    command ends, and what it kept of the output is the evidence of a failure."""

    def flush(self) -> None: ...

    @property
    def text(self) -> str: ...


@dataclass
class Step(ABC):
    """Base class for resources. Subclasses are dataclasses with their own fields."""

    #: Handler names to fire (once, after the role) when this step changed something.
    notify: Sequence[str] = field(default=(), kw_only=True)
    #: Optional label shown in output instead of the derived id.
    label: str = field(default="", kw_only=True)
    #: Whether applying it may change what the facts say (a package, a venv, a link on PATH...): a
    #: run that applied one reads the facts again at its end (engine/recorded.py, record_next).
    #: False only where it cannot (a file's content, a unit's state, a health wait).
    changes_facts: ClassVar[bool] = True

    @property
    @abstractmethod
    def id(self) -> str:
        """Stable, unique, readable: 'apt:hello', 'file:/etc/x.conf', 'unit:foo.service'."""

    @property
    def title(self) -> str:
        return self.label or self.id

    @abstractmethod
    def probe(self) -> list[str]:
        """argv whose stdout tells the current state. Must not change anything."""

    def batched(self) -> Batched:
        """How its probe joins the batch: by default, probe() as it is, in the batch's one round
        trip. A step that reads what many steps read (a file's stat, a unit's state) asks the
        shared passes instead (Batched), and any step may bring a Pass of its own."""
        return Batched.alone(self.probe())

    @abstractmethod
    def check(self, probe: Probe) -> Outcome:
        """Pure: compare the probe output with the desired state."""

    def commands(self) -> list[Command] | None:
        """What apply runs, in order, as data; None when apply is code of its own."""
        return None

    def apply(self, target: Transport) -> None:
        """Make it so. Raise StepError (with evidence) on failure. Must be safe to repeat."""
        commands = self.commands()
        if commands is None:
            raise NotImplementedError(f"{type(self).__name__} has neither commands() nor its own apply()")
        run_all(commands, target)
