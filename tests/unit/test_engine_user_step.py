"""A step written outside gpunode joins the one batched round trip through the step protocol
(steps/base.Batched, steps/base.Pass): the engine knows no concrete step, so a user's step with a
pass of its own is read with every other step's probe, its pass runs once for all its steps, and
a no-op is still one command."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpunode.engine import RolePlan, passes, probe
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Pass, Probe, Step
from gpunode.steps.files import File
from gpunode.testing import converge
from gpunode.transport import LocalTransport
from tests.unit.engine_helpers import CountingTransport

# What a user's module would hold: its own probe, and one pass that answers for all its steps.
_COUNT = 'if [ -r "$1" ]; then grep -cxF -e "$2" -- "$1"; else echo 0; fi || :'
# Every asked file in ONE grep: "path NUL line" per line (as the shipped grep pass does).
_LINES = '[ "$#" -eq 0 ] || grep -aHZ "" -- "$@" 2>/dev/null; :'


def _lines(output: Probe, paths: list[Hashable]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {str(p): [] for p in paths}
    for line in output.output.split("\n"):
        path, sep, text = line.partition("\0")
        if sep:
            found.setdefault(path, []).append(text)
    return found


LINES = Pass("user lines", lambda paths: ["sh", "-c", _LINES, "sh", *map(str, paths)], _lines)


@dataclass
class HasLine(Step):
    """`line` is a line of the file at `path` (appended when it is not)."""

    path: str
    line: str

    @property
    def id(self) -> str:
        return f"line:{self.path}:{self.line}"

    def probe(self) -> list[str]:
        return ["sh", "-c", _COUNT, "sh", self.path, self.line]

    def batched(self) -> Batched:
        def answer(own: Probe | None, got: tuple[Any, ...]) -> Probe:
            return Probe(0, f"{got[0][self.path].count(self.line)}\n")  # what grep -c prints
        return Batched(tuple(self.probe()), asks=((LINES, self.path),), answer=answer)

    def check(self, probe: Probe) -> Outcome:
        if int(probe.output.strip() or 0):
            return NoChange(f"{self.path} has the line {self.line!r}")
        return Change(f"append {self.line!r} to {self.path}")

    def commands(self) -> list[Command]:
        return [Command(("sh", "-c", 'printf "%s\\n" "$2" >> "$1"', "sh", self.path, self.line),
                        f"appending to {self.path}")]


def _roles(root: Path) -> list[RolePlan]:
    return [RolePlan("mine", [File(str(root / "a.conf"), "port=1\n"),
                              HasLine(str(root / "a.conf"), "port=1"),
                              HasLine(str(root / "b.conf"), "debug=0"),
                              HasLine(str(root / "c.conf"), "x=1")])]


def test_a_users_step_is_answered_by_its_own_pass_in_the_one_round_trip(tmp_path: Path):
    state = tmp_path / "state"
    (tmp_path / "b.conf").write_text("# comment\n")
    first = converge(_roles(tmp_path), state)
    assert first.changed() == ["file:" + str(tmp_path / "a.conf"), f"line:{tmp_path}/b.conf:debug=0",
                               f"line:{tmp_path}/c.conf:x=1"]
    assert (tmp_path / "b.conf").read_text() == "# comment\ndebug=0\n"

    second = converge(_roles(tmp_path), state)
    assert (second.recap.ok, second.recap.changed, second.recap.round_trips) == (4, 0, 1)
    [lock_shell] = second.commands
    batch = lock_shell[6]  # sh -c LOCK sh STATE OWNER PROBE ...
    # the user's pass ran once for its three steps; their own probe not at all
    assert batch.count(_LINES) == 1 and _COUNT not in batch
    for name in ("a.conf", "b.conf", "c.conf"):
        assert str(tmp_path / name) in batch


def test_a_pass_runs_once_over_every_path_asked_and_each_step_reads_its_own_answer(tmp_path: Path):
    (tmp_path / "a.conf").write_text("x=1\ny=2\n")
    steps = [HasLine(str(tmp_path / "a.conf"), "y=2"), HasLine(str(tmp_path / "a.conf"), "z=3"),
             HasLine(str(tmp_path / "none.conf"), "x=1")]
    folded = passes.fold([["echo", "mine"], *(s.batched() for s in steps)])
    assert folded.argvs == [["echo", "mine"], ["sh", "-c", _LINES, "sh", str(tmp_path / "a.conf"),
                                               str(tmp_path / "none.conf")]]
    got = probe.run_batch(LocalTransport(), [s.batched() for s in steps])
    own = [LocalTransport().run(s.probe()) for s in steps]
    assert [p.output for p in got] == [r.stdout for r in own] == ["1\n", "0\n", "0\n"]


def test_a_pass_whose_reading_fails_leaves_its_steps_to_their_own_probe(tmp_path: Path):
    (tmp_path / "a.conf").write_text("x=1\n")

    def broken(output: Probe, paths: list[Hashable]) -> dict:
        raise ValueError("an output this parser did not expect")

    @dataclass
    class Fragile(HasLine):
        def batched(self) -> Batched:
            return Batched(tuple(self.probe()), asks=((Pass("fragile", LINES.command, broken), self.path),),
                           answer=lambda own, got: Probe(0, f"{got[0][self.path].count(self.line)}\n"))

    steps = [Fragile(str(tmp_path / "a.conf"), "x=1"), Fragile(str(tmp_path / "a.conf"), "y=2")]
    counted = CountingTransport()
    got = probe.run_batch(counted, [s.batched() for s in steps])
    assert [p.output for p in got] == ["1\n", "0\n"]  # what their own probes print
    assert len(counted.commands) == 2  # the batch, then the two own probes in one more
