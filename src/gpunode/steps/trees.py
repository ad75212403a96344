"""Whole folders: an overlay of other folders' contents, and a path that must be absent.

An overlay is judged by one hash over the relative names and contents of
every source file, computed on the target and kept in a stamp file in the
destination: a re-run sends no file list over the wire, only two hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode import shell
from gpunode.errors import StepError
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step

# Both take the same stamp: one hash over the relative names and contents of every source file, in
# a fixed order (the run after a copy is a no-op only where the two files say it alike:
# tests/unit/test_steps_trees.py). The apply takes it before the copy, so a source that changes
# during it is copied again next run.
_PROBE = shell.script("gpunode.steps", "overlay_probe.sh")
_APPLY = shell.script("gpunode.steps", "overlay_apply.sh")


@dataclass
class Overlay(Step):
    """The files of every folder in `sources` are present in `dest` (later sources win).

    + dest: e.g. CUDA_HOME/include
    + sources: folders whose contents are copied in (e.g. flashinfer's vendored CCCL)
    """

    dest: str
    sources: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"overlay:{self.dest}"

    def probe(self) -> list[str]:
        return shell.sh(_PROBE, self.dest, *self.sources)

    def check(self, probe: Probe) -> Outcome:
        lines = probe.lines()
        missing = [line.split(" ", 1)[1] for line in lines if line.startswith("@@missing ")]
        stamp, current = (lines[0], lines[-1]) if len(lines) >= 2 else ("none", "")
        if missing:
            return Change(f"overlay {len(self.sources)} folders onto {self.dest} "
                          f"(not there yet: {', '.join(missing)}; they come with the engine install)")
        if stamp == current:
            return NoChange(f"{self.dest} already holds the overlay of {len(self.sources)} folders "
                            f"(content hash {current[:8]})")
        return Change(f"overlay {len(self.sources)} folders onto {self.dest}")

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_APPLY, self.dest, *self.sources)), f"overlaying onto {self.dest}",
                        failure=f"overlay onto {self.dest} failed",
                        hint="re-run; the stamp is written only when complete",
                        exits=((3, f"cannot overlay onto {self.dest}: a source folder does not exist",
                                "the engine role installs these; run it first"),))]


@dataclass
class Absent(Step):
    """Nothing exists at `path` (a stale cache, an old venv). `~/` means root's home."""

    path: str

    @property
    def id(self) -> str:
        return f"absent:{self.path}"

    def _real(self) -> str:
        return "/root/" + self.path[2:] if self.path.startswith("~/") else self.path

    def probe(self) -> list[str]:
        return shell.sh('[ -e "$1" ] || [ -L "$1" ] && du -sh "$1" 2>/dev/null | cut -f1 || echo absent', self._real())

    def check(self, probe: Probe) -> Outcome:
        self._refuse_root()
        if probe.output.strip() == "absent":
            return NoChange(f"{self._real()} does not exist")
        return Change(f"remove {self._real()} ({probe.output.strip() or 'unknown size'})")

    def commands(self) -> list[Command]:
        self._refuse_root()
        return [Command(("rm", "-rf", "--", self._real()), f"removing {self._real()}")]

    def _refuse_root(self) -> None:
        # Refused at check time, so that a run stops before it changes anything else.
        if self._real().rstrip("/") in ("", "/root"):
            raise StepError(f"refusing to remove {self._real()}",
                            hint="name the folder inside it that should go (Absent removes what is at its path)")
