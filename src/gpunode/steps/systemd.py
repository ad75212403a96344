"""systemd: Unit (a unit file that notifies daemon-reload and a restart) and
Service (enabled and/or running, or not).

Service's probe is one `systemctl show` of the properties that matter, which
works for units systemd has never heard of (LoadState=not-found) too.

A unit file is checked by `systemd-analyze verify` on the target before it is
written: a unit systemd would not load (unbalanced quoting, an ExecStart that
is not executable, a Requires= on a unit that does not exist) must not replace
one that works.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpunode import shell
from gpunode.errors import StepError, tail
from gpunode.steps import reuse
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Pass, Probe, Step, run_all
from gpunode.steps.files import File, Template
from gpunode.transport.base import Transport

UNIT_DIR = "/etc/systemd/system"
#: Handler names the engine resolves by pattern (engine/handlers.py); steps only name them.
DAEMON_RELOAD = "daemon-reload"
PROPERTIES = ("LoadState", "UnitFileState", "ActiveState", "SubState", "NeedDaemonReload")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.(service|socket|timer|target|path|mount)$")

# Unit states for which "enabled" holds or cannot be had by `systemctl enable`.
_COUNTS_AS_ENABLED = {"enabled", "enabled-runtime", "static", "indirect", "generated", "alias"}
_RUNNING = {"active", "activating", "reloading"}

_SERVICE_APPLY = shell.script("gpunode.steps", "service_apply.sh")
# The copy is verified under its own name (systemd derives the unit's type from it), in a
# folder of its own so that the unit systemd loads now is not touched.
_VERIFY = shell.script("gpunode.steps", "unit_verify.sh")


def _blocks(shown: Probe, names: list[Hashable]) -> dict[Hashable, str] | None:
    """One `systemctl show` of many units -> each unit's block, or None where the blocks do not
    match the units asked (systemd not answering: each Service then probes itself)."""
    if not shown.ok:
        return None
    blocks = [b for b in shown.output.split("\n\n") if b.strip()]
    if len(blocks) != len(names) or any("LoadState=" not in b for b in blocks):
        return None
    return {n: b.strip("\n") + "\n" for n, b in zip(names, blocks, strict=True)}


#: ONE `systemctl show` for every Service of a run, in the shell that reuses its last answer (steps/reuse.py).
SHOW = Pass("systemctl show", lambda names: reuse.units([str(n) for n in names]), _blocks, rank=40)


def verify_command(name: str, data: bytes) -> Command:
    """The rendered unit `name` as systemd-analyze reads it, before it replaces the one on the target."""
    return Command(tuple(shell.sh(_VERIFY, name)), f"verifying {name} with systemd-analyze", stdin=data,
                   reads_as=f"systemd-analyze verify /run/gpunode-verify.XXXXXX/{shell.quote(name)}",
                   failure=f"systemd would not load the new {name}; the unit on the target was left as it was",
                   hint="the lines above are systemd-analyze's; fix the variable or template that made them "
                   "(`inv provision --check` shows the unit's diff)")


def _check_name(name: str) -> None:
    if not _UNIT_NAME.match(name):
        raise StepError(f"not a systemd unit name: {name!r}",
                        hint="use the full name with its type, e.g. gpunode-demo.service")


@dataclass
class Unit(Step):
    """A unit file under /etc/systemd/system, from literal content or a template.

    By default it notifies daemon-reload and restart:<name>; restart=False
    notifies only daemon-reload.
    """

    changes_facts: ClassVar[bool] = False

    name: str
    content: str | None = None
    template: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    restart: bool = True
    directory: str = UNIT_DIR

    def __post_init__(self) -> None:
        _check_name(self.name)
        if (self.content is None) == (self.template is None):
            raise StepError(f"Unit {self.name} needs exactly one of content= or template=")
        path = f"{self.directory}/{self.name}"
        self.file: File = (File(path, self.content) if self.content is not None
                           else Template(path, template=self.template or "", vars=self.vars))
        if not self.notify:
            self.notify = (DAEMON_RELOAD, f"restart:{self.name}") if self.restart else (DAEMON_RELOAD,)

    @property
    def id(self) -> str:
        return f"unit:{self.name}"

    def probe(self) -> list[str]:
        return self.file.probe()

    def batched(self) -> Batched:
        return self.file.batched()

    def check(self, probe: Probe) -> Outcome:
        return self.file.check(probe)

    def commands(self) -> list[Command]:
        return [verify_command(self.name, self.file.data), *self.file.commands()]

    def apply(self, target: Transport) -> None:
        run_all([verify_command(self.name, self.file.data)], target)
        self.file.apply(target)


@dataclass
class UnitTemplate(Template):
    """A unit file rendered from a template (a role's own unit), verified before it is written."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_name(self.path.rsplit("/", 1)[-1])

    def commands(self) -> list[Command]:
        return [verify_command(self.path.rsplit("/", 1)[-1], self.data), *super().commands()]

    def apply(self, target: Transport) -> None:
        run_all([verify_command(self.path.rsplit("/", 1)[-1], self.data)], target)
        super().apply(target)


def parse_show(output: str) -> dict[str, str]:
    """`systemctl show -p A -p B` output -> {A: value, B: value}."""
    props: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in PROPERTIES:
            props[key] = value
    return props


@dataclass
class Service(Step):
    """The unit is enabled (or not) and running (or not); None leaves that side alone."""

    changes_facts: ClassVar[bool] = False

    name: str
    enabled: bool | None = True
    running: bool | None = True

    def __post_init__(self) -> None:
        _check_name(self.name)

    @property
    def id(self) -> str:
        return f"service:{self.name}"

    def probe(self) -> list[str]:
        return ["systemctl", "show", *(f"-p{p}" for p in PROPERTIES), "--", self.name]

    def batched(self) -> Batched:
        def answer(own: Probe | None, got: tuple[Any, ...]) -> Probe | None:
            return Probe(0, got[0][self.name]) if got[0] is not None else None

        return Batched(tuple(self.probe()), asks=((SHOW, self.name),), answer=answer)

    def check(self, probe: Probe) -> Outcome:
        props = parse_show(probe.output)
        if not probe.ok or "LoadState" not in props:
            raise StepError(f"cannot read the state of {self.name} from systemd "
                            f"(systemctl exit code {probe.exit_code})",
                            evidence=tail(probe.output),
                            hint="the target must run systemd as PID 1; in an LXC container, "
                            "check that it boots /sbin/init")
        load, file_state = props["LoadState"], props.get("UnitFileState", "")
        active = props.get("ActiveState", "")
        if load == "masked" or file_state == "masked":
            raise StepError(f"{self.name} is masked, so it can be neither started nor enabled",
                            hint=f"unmask it on the target with `systemctl unmask {self.name}` if that is wanted")
        todo: list[str] = []
        if self.enabled is True and file_state not in _COUNTS_AS_ENABLED:
            todo.append("enable")
        if self.enabled is False and file_state in ("enabled", "enabled-runtime"):
            todo.append("disable")
        if self.running is True and active not in _RUNNING:
            todo.append("start")
        if self.running is False and active in _RUNNING | {"deactivating"}:
            todo.append("stop")
        if todo:
            now = "not loaded yet" if load == "not-found" else f"{file_state or 'no unit file'}, {active}"
            return Change(f"{' and '.join(todo)} {self.name} (now {now})")
        said = []
        if self.enabled is not None:
            said.append(file_state if self.enabled else f"not enabled ({file_state or 'no unit file'})")
        if self.running is not None:
            sub = props.get("SubState", "")
            said.append(f"running ({active}/{sub})" if self.running else f"stopped ({active})")
        return NoChange(f"{self.name} is already {' and '.join(said) or 'as wanted'}")

    def commands(self) -> list[Command]:
        def word(value: bool | None) -> str:
            return "" if value is None else ("yes" if value else "no")

        said = [f"systemctl {verb} {shell.quote(self.name)}" for verb, wanted in
                (("enable", self.enabled is True), ("disable", self.enabled is False),
                 ("start", self.running is True), ("stop", self.running is False)) if wanted]
        return [Command(tuple(shell.sh(_SERVICE_APPLY, self.name, word(self.enabled), word(self.running))),
                        f"bringing {self.name} to the wanted state",
                        reads_as=" && ".join(said) + "  # after a daemon-reload where systemd asks for one",
                        failure=f"systemctl could not bring {self.name} to the wanted state",
                        hint=f"see `journalctl -u {self.name}` on the target; re-running is safe")]
