"""Checks on what was gathered from a target (facts, units, devices), named by the catalogue.

Each takes the Evidence and returns the line that shows the failure, or "" when it does not apply.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpunode.facts.types import Facts


@dataclass(frozen=True)
class Unit:
    name: str
    load: str
    active: str
    sub: str
    description: str = ""
    result: str = ""        # systemd's Result=: success, exit-code, signal, timeout, start-limit-hit...
    restarts: int = 0       # NRestarts=
    main_pid: int = 0
    port: int | None = None  # the --port of its ExecStart, when written out literally

    @property
    def line(self) -> str:
        extra = f" (result {self.result})" if self.result not in ("", "success") else ""
        extra += f", {self.restarts} restarts" if self.restarts else ""
        return f"{self.name} {self.load} {self.active} {self.sub} {self.description}".strip() + extra


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket (`ss -ltnp`)."""

    address: str
    port: int
    process: str = ""       # users:(("python3",pid=257,fd=3))

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"pid=(\d+)", self.process))


@dataclass(frozen=True)
class Evidence:
    """What doctor knows of one target: facts, gpunode units, their journal, the /dev/nvidia* nodes."""

    target: str
    facts: Facts
    units: tuple[Unit, ...] = ()
    journal: tuple[str, ...] = ()
    #: `ls /dev/nvidia*` output; None when not gathered (a facts snapshot of an older gpunode)
    devices: str | None = None
    #: listening TCP sockets; None when not gathered (no ss on the target, an older snapshot)
    listeners: tuple[Listener, ...] | None = None
    notes: list[str] = field(default_factory=list)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def libcuda_missing(e: Evidence) -> str:
    if e.facts.gpus and not e.facts.system.libcuda:
        return f"{len(e.facts.gpus)} GPU(s) but libcuda.so.1 does not resolve (ldconfig -p)"
    return ""


def driver_library_mismatch(e: Evidence) -> str:
    lib, module = e.facts.system.libcuda_version, e.facts.driver.version
    if lib and module and lib != module:
        return f"libcuda.so.{lib} in the container, kernel module {module}"
    return ""


def nvcc_before_12_9_on_sm12x(e: Evidence) -> str:
    if not any((g.compute_cap or "").startswith("12.") for g in e.facts.gpus):
        return ""
    old = [t for t in e.facts.system.toolkits if _version(t.version) < (12, 9)]
    if old and not any(_version(t.version) >= (12, 9) for t in e.facts.system.toolkits if t.kind == "pip"):
        t = old[0]
        return f"CC {e.facts.gpus[0].compute_cap} GPU, nvcc {t.version} at {t.path} ({t.kind})"
    return ""


def nvidia_uvm_missing(e: Evidence) -> str:
    if e.devices is None or not e.facts.gpus:
        return ""
    if "/dev/nvidia-uvm" not in e.devices:
        nodes = " ".join(sorted(set(e.devices.split())))[:200]
        return f"no /dev/nvidia-uvm among: {nodes}" if nodes else "no /dev/nvidia* device nodes at all"
    return ""


def shm_full(e: Evidence) -> str:
    s = e.facts.system
    if s.shm_size_bytes and s.shm_free_bytes < s.shm_size_bytes * 0.05:
        return f"/dev/shm {s.shm_free_bytes >> 20} MiB free of {s.shm_size_bytes >> 20} MiB"
    return ""


def shm_over_memory_limit(e: Evidence) -> str:
    s = e.facts.system
    used = s.shm_size_bytes - s.shm_free_bytes
    bound = s.memory_bound()
    if bound and used > bound[0] * 0.8:
        return f"/dev/shm holds {used >> 20} MiB, over 80% of {bound[1]} {bound[0] >> 20} MiB"
    return ""


def unit_failed(e: Evidence) -> str:
    """Failed, or between two crashes of a restart loop (activating auto-restart)."""
    return "; ".join(u.line for u in e.units if u.active == "failed" or u.sub == "auto-restart")


def port_taken(e: Evidence) -> str:
    """A unit that is not running while another process listens on its port."""
    shown = []
    for u in e.units:
        if u.port is None or (u.active == "active" and u.sub == "running"):
            continue
        others = [x for x in e.listeners or () if x.port == u.port and u.main_pid not in x.pids]
        if others:
            shown.append(f"{u.name} is {u.active} ({u.sub}); port {u.port} is held by "
                         + ", ".join(f"{x.address}:{x.port} {x.process}".strip() for x in others))
    return "; ".join(shown)


CHECKS: dict[str, Callable[[Evidence], str]] = {
    f.__name__: f for f in (libcuda_missing, driver_library_mismatch, nvcc_before_12_9_on_sm12x,
                            nvidia_uvm_missing, shm_full, shm_over_memory_limit, unit_failed, port_taken)
}
