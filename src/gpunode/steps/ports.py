"""HTTP ports answering: every URL returns 200, waited for on the target in one command.

For services that have no completion API (what steps.health.Ready also asks of
inference servers): a web server, a metrics port, a stand-in in a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gpunode import shell
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step

_PROBE = shell.script("gpunode.steps", "answering_probe.sh")

_WAIT = shell.script("gpunode.steps", "answering_wait.sh")


def down(urls: list[str], probe_output: str) -> list[str]:
    """The URLs whose line in the probe's output is not `URL 200`."""
    codes = dict(line.rsplit(" ", 1) for line in probe_output.splitlines() if " " in line)
    return [u for u in urls if codes.get(u) != "200"]


@dataclass
class Answering(Step):
    """Every URL answers GET with 200 (curl on the target), within grace_s of being asked.

    + urls: e.g. http://127.0.0.1:8080/
    + units: the units behind them, whose journal a failure shows
    """

    changes_facts: ClassVar[bool] = False

    urls: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    grace_s: int = 60

    @property
    def id(self) -> str:
        return f"answering:{len(self.urls)} urls"

    def probe(self) -> list[str]:
        return shell.sh(_PROBE, *self.urls)

    def check(self, probe: Probe) -> Outcome:
        missing = down(self.urls, probe.output)
        if not missing:
            return NoChange(f"all {len(self.urls)} URLs answer with 200")
        return Change(f"wait up to {self.grace_s}s for {len(missing)} of {len(self.urls)} URLs to answer "
                      f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})")

    def commands(self) -> list[Command]:
        journal = ["journalctl", "-n", "20", "--no-pager", "-o", "cat"]
        for unit in self.units:
            journal += ["-u", unit]
        return [Command(tuple(shell.sh(_WAIT, str(self.grace_s), *self.urls)),
                        f"waiting for {len(self.urls)} URLs to answer", timeout=self.grace_s + 30,
                        failure=f"not every URL answered with 200 within {self.grace_s}s",
                        hint="look at the units' journal on the target",
                        evidence=tuple(journal) if self.units else ())]
