"""Debian packages: Packages(names) makes sure each one is installed.

The probe is one dpkg-query (no apt lock, no network). apply runs
`apt-get update` only when a wanted package is unknown to the local lists, or
when an install from stale lists fails, and installs only what is missing,
non-interactively and without recommends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode import shell
from gpunode.errors import StepError, tail
from gpunode.steps import reuse
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Probe, Step, run_all
from gpunode.steps.progress import AptSink, Line, Progress
from gpunode.transport.base import Transport

_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?$")
_NOT_FOUND = re.compile(r"^dpkg-query: no packages found matching (\S+)$")

FORMAT = "${Package}\\t${db:Status-Abbrev}\\t${Version}\\n"

_INSTALL = shell.script("gpunode.steps", "apt_install.sh")


def _installed(abbrev: str) -> bool:
    """db:Status-Abbrev: desired, status, error flag; 'ii ' or 'hi ' is a clean install."""
    return len(abbrev) >= 2 and abbrev[1] == "i" and abbrev[2:3].strip() == ""


@dataclass
class Packages(Step):
    """These Debian packages are installed (any version)."""

    names: Sequence[str]
    #: (done, total, what) in percent while apt-get downloads and installs; its output lines for -v
    on_progress: Progress | None = field(default=None, repr=False, compare=False)
    on_line: Line | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.names = tuple(self.names)
        bad = [n for n in self.names if not _NAME.match(n)]
        if bad or not self.names:
            raise StepError(f"not a Debian package name: {bad[0]!r}" if bad else "Packages() needs at least one name",
                            hint="package names are lowercase letters, digits and + . -, optionally :arch")

    @property
    def id(self) -> str:
        return "apt:" + ",".join(self.names)

    def probe(self) -> list[str]:
        return ["dpkg-query", "-W", f"-f={FORMAT}", "--", *self.names]

    def batched(self) -> Batched:
        # In the batch, in the shell that reuses the last answer while dpkg's status holds (steps/reuse.py).
        return Batched.alone(self.probe(), reuse.packages(self.names))

    def check(self, probe: Probe) -> Outcome:
        state: dict[str, tuple[str, str]] = {}
        unknown: set[str] = set()
        strange: list[str] = []
        for line in probe.lines():
            parts = line.split("\t")
            missing = _NOT_FOUND.match(line)
            if len(parts) == 3:
                state[parts[0]] = (parts[1], parts[2])
            elif missing:
                unknown.add(missing.group(1))
            elif line.strip():
                strange.append(line)
        if probe.exit_code not in (0, 1) or strange:
            raise StepError(f"cannot read the package state of {', '.join(self.names)} "
                            f"(dpkg-query exit code {probe.exit_code})",
                            evidence=tail(probe.output),
                            hint="is this a Debian or Ubuntu system with dpkg?")
        todo: list[str] = []
        leftovers: list[str] = []
        have: list[str] = []
        for name in self.names:
            abbrev, version = state.get(name.split(":")[0], ("", ""))
            if name in unknown or not _installed(abbrev):
                todo.append(name)
                if abbrev.startswith("rc"):
                    leftovers.append(name)
            else:
                have.append(f"{name} {version}")
        if todo:
            note = f" ({', '.join(leftovers)} removed earlier, config files kept)" if leftovers else ""
            return Change(f"install {', '.join(todo)}{note}")
        count = "the package is" if len(have) == 1 else f"all {len(have)} packages are"
        return NoChange(f"{count} already installed: {', '.join(have)}")

    def commands(self) -> list[Command]:
        names = ", ".join(self.names)
        return [Command(tuple(shell.sh(_INSTALL, *self.names)), f"installing {names}",
                        failure=f"apt-get could not install {names}",
                        hint="check the apt sources and the network on the target; re-running is safe", watched=True)]

    def apply(self, target: Transport) -> None:
        # apt's own status lines (APT::Status-Fd=1) become the progress of the one command.
        sink = AptSink(self.on_progress, self.on_line)
        run_all(self.commands(), target, sink)
        sink.finish()
