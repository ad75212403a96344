"""CUDA driver library links: `libcuda.so` next to `libcuda.so.1`, found through ldconfig.

Triton finds the driver through `ldconfig -p` and needs the unversioned
name; containers with bind-mounted or installed driver libraries often have
only libcuda.so.1, and a stale linker cache hides new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode import shell
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step

_PROBE = shell.script("gpunode.steps", "libcuda_probe.sh")

_APPLY = shell.script("gpunode.steps", "libcuda_link.sh")


@dataclass
class LibcudaLink(Step):
    """ldconfig knows libcuda.so (unversioned), linked to libcuda.so.1 in the driver's folder."""

    @property
    def id(self) -> str:
        return "libcuda:libcuda.so"

    def probe(self) -> list[str]:
        return shell.sh(_PROBE)

    def check(self, probe: Probe) -> Outcome:
        names = {line.split()[0] for line in probe.lines() if line and not line.startswith("file ")}
        files = [line.split(" ", 1)[1] for line in probe.lines() if line.startswith("file ")]
        if "libcuda.so" in names:
            return NoChange("ldconfig already lists libcuda.so")
        if "libcuda.so.1" in names or files:
            where = files[0].rsplit("/", 1)[0] if files else "the driver's folder"
            return Change(f"run ldconfig and link libcuda.so -> libcuda.so.1 in {where}")
        return Change("link libcuda.so -> libcuda.so.1 once the host driver's user-space libraries are in the "
                      "container (libcuda.so.1 is not there yet, so applying this will fail)")

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_APPLY)), "linking libcuda.so", failure="linking libcuda.so failed",
                        hint="re-run; `ldconfig -p | grep libcuda` on the target shows what the linker sees",
                        exits=((3, "libcuda.so.1 is not installed in the target, so there is nothing to link",
                                "install the host's exact driver version inside the container (NVIDIA .run with "
                                "--no-kernel-module) or bind-mount the driver libraries"),))]
