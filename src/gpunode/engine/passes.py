"""One pass per kind inside the batched probe: no process start per step.

A step says how its probe joins the batch as data (steps/base.Batched): a command of its own, a
share of the passes that many steps ask (steps/base.Pass: one `stat` and one `sha256sum` or
`grep` over every path, steps/reads.py; one `systemctl show` over every unit, steps/systemd.py),
or both, and how its answer is read from theirs. This module knows no concrete step: it runs
each pass once, over every argument asked, after the steps' own commands, and gives each step
the output its own probe would have printed, so its check stays the same pure function. Where a
step's answer cannot say exactly that, the step gets None and the runner runs its own probe.

The batch holds, in order: the commands of the steps that ask no pass (and the plain argvs, such
as the pending handlers' probe), the commands of those that ask one too, then the passes by rank.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpunode.steps.base import Batched, Pass, Probe

#: What the batch runs for one probe: a step's Batched, or a plain argv (run as it is).
Item = Batched | Sequence[str]


@dataclass
class Folded:
    """The argvs to run (the steps' own commands, then one per pass) and how to map their results
    back onto the original probes."""

    argvs: list[list[str]]
    items: list[Batched]
    own: list[int] = field(default_factory=list)  # items whose own command runs, in argvs order
    passes: list[Pass] = field(default_factory=list)
    asked: dict[Pass, list[Hashable]] = field(default_factory=dict)

    @property
    def originals(self) -> list[list[str]]:
        """Each probe as it runs on its own."""
        return [list(b.probe) for b in self.items]

    def unfold(self, results: Sequence[Probe]) -> list[Probe | None]:
        it = iter(results)
        own = {i: next(it) for i in self.own}
        read = {p: _guarded(p.read, next(it), self.asked[p]) for p in self.passes}
        out: list[Probe | None] = []
        for i, item in enumerate(self.items):
            if item.answer is None:
                out.append(own.get(i))
            else:
                out.append(_guarded(item.answer, own.get(i), tuple(read[p] for p, _ in item.asks)))
        return out


def _guarded(read: Callable[..., Any], *args: Any) -> Any:
    """A pass's reading or a step's answer; None where it fails (a user's parser that meets an
    output it did not expect): those steps then run their own probe, whose output their check judges."""
    try:
        return read(*args)
    except Exception:  # noqa: BLE001 - the step's own probe is the fallback, never a guess
        return None


def _batched(item: Item) -> Batched:
    return item if isinstance(item, Batched) else Batched.alone(item)


def fold(items: Sequence[Item]) -> Folded:
    batched = [_batched(i) for i in items]
    folded = Folded([], batched)
    # Those that ask no pass first, then those that also run a command of their own.
    for group in ([i for i, b in enumerate(batched) if not b.asks],
                  [i for i, b in enumerate(batched) if b.asks and b.own]):
        for i in group:
            folded.own.append(i)
            folded.argvs.append(list(batched[i].own))
    for b in batched:
        for p, arg in b.asks:
            asked = folded.asked.setdefault(p, [])
            if arg not in asked:
                asked.append(arg)
    folded.passes = sorted(folded.asked, key=lambda p: p.rank)
    folded.argvs += [p.command(folded.asked[p]) for p in folded.passes]
    return folded
