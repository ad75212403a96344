"""Applies as data: the steps whose apply is a fixed list of commands say them (`commands()`), the
default apply runs exactly those, a check run's events carry them, and `--commands` prints them."""

from __future__ import annotations

import io
import os
import shlex
import stat

import pytest
from rich.console import Console

from gpunode import shell
from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Event
from gpunode.engine.handlers import CommandHandler, SystemctlHandler, generic
from gpunode.errors import CommandError, StepError
from gpunode.report import HumanReport
from gpunode.steps.apt import _INSTALL as _APT_INSTALL
from gpunode.steps.apt import Packages
from gpunode.steps.base import Command, NoChange, Probe
from gpunode.steps.cuda import _APPLY as _LIBCUDA_APPLY
from gpunode.steps.cuda import LibcudaLink
from gpunode.steps.files import _DIR_APPLY, _LINK_APPLY, Directory, File, Symlink
from gpunode.steps.ports import Answering
from gpunode.steps.progress import ProgressSink
from gpunode.steps.systemd import _SERVICE_APPLY, _VERIFY, Service, Unit
from gpunode.steps.trees import _APPLY as _OVERLAY_APPLY
from gpunode.steps.trees import Absent, Overlay
from gpunode.steps.weights import STAGE_SCRIPT, StagedWeights
from gpunode.transport import LocalTransport
from gpunode.transport.base import write_argv
from tests.unit.engine_helpers import Collect, CountingTransport


def test_the_commands_are_pinned_argv_with_the_file_content_on_stdin():
    f = File("/etc/gpunode/a.env", "PORT=1\n", mode=0o600, owner="root:root")
    assert f.commands() == [Command(tuple(write_argv("/etc/gpunode/a.env", 0o600, "root:root", f.sha256)),
                                    "writing /etc/gpunode/a.env", stdin=b"PORT=1\n")]
    assert Directory("/etc/gpunode", mode=0o750).commands() == [
        Command(tuple(shell.sh(_DIR_APPLY, "/etc/gpunode", "750", "")), "creating directory /etc/gpunode")]
    assert Symlink("/usr/local/bin/x", "/opt/x/bin/x").commands() == [
        Command(tuple(shell.sh(_LINK_APPLY, "/usr/local/bin/x", "/opt/x/bin/x")),
                "linking /usr/local/bin/x → /opt/x/bin/x")]
    service = Service("gpunode-cpu0.service", enabled=True, running=None).commands()[0]
    assert service.argv == tuple(shell.sh(_SERVICE_APPLY, "gpunode-cpu0.service", "yes", ""))
    assert service.failure == "systemctl could not bring gpunode-cpu0.service to the wanted state"
    unit = Unit("gpunode-cpu0.service", content="[Service]\nExecStart=/bin/true\n")
    verify, *write = unit.commands()
    assert write == unit.file.commands()
    assert verify.argv == tuple(shell.sh(_VERIFY, "gpunode-cpu0.service")) and verify.stdin == unit.file.data


def test_the_shown_line_runs_as_it_reads_and_keeps_content_and_secret_hashes_out(tmp_path):
    plain = File(str(tmp_path / "a b.conf"), "x=1\n").commands()[0].shown()
    assert plain.endswith("  # stdin: 4 bytes") and "x=1" not in plain
    assert shlex.split(plain.split("  # stdin")[0]) == list(write_argv(str(tmp_path / "a b.conf"), 0o644, None,
                                                                       File("/", "x=1\n").sha256))
    secret = File("/etc/gpunode/cpu0.secrets.env", "VLLM_API_KEY=s3cret\n", mode=0o600, sensitive=True)
    write = secret.commands()[0]
    shown = write.shown()
    assert secret.sha256 not in shown and "s3cret" not in shown and shown.split("  #")[0].endswith(" -")
    # neither argv on the target (ps) nor the probe's carries the secret's hash or its size
    for argv in (write.argv, tuple(secret.probe())):
        assert not any(secret.sha256 in w or w == str(len(secret.data)) for w in argv), argv


def test_a_secret_is_written_with_its_hash_on_stdin_and_a_cut_stream_is_refused(tmp_path):
    target = LocalTransport()
    path = tmp_path / "cpu0.secrets.env"
    secret = File(str(path), "VLLM_API_KEY=s3cret-value\n", mode=0o600, sensitive=True)
    secret.apply(target)
    assert path.read_bytes() == secret.data and stat.S_IMODE(path.stat().st_mode) == 0o600
    write = secret.commands()[0]
    cut = target.run(list(write.argv), stdin=(write.stdin or b"")[:-4])
    assert cut.exit_code != 0 and "not the content sent" in cut.stderr and secret.sha256 not in cut.stderr
    assert path.read_bytes() == secret.data and [p.name for p in tmp_path.iterdir()] == [path.name]
    assert secret.check(Probe(0, target.run(secret.probe()).stdout)) == NoChange(
        f"{path} already has the desired content, mode 0600")


def test_the_default_apply_runs_the_commands(tmp_path):
    target = LocalTransport()
    Directory(str(tmp_path / "etc"), mode=0o750).apply(target)
    File(str(tmp_path / "etc" / "a.conf"), "port=1\n", mode=0o640).apply(target)
    Symlink(str(tmp_path / "link"), str(tmp_path / "etc" / "a.conf")).apply(target)
    assert stat.S_IMODE(os.stat(tmp_path / "etc").st_mode) == 0o750
    assert (tmp_path / "etc" / "a.conf").read_text() == "port=1\n"
    assert stat.S_IMODE(os.stat(tmp_path / "etc" / "a.conf").st_mode) == 0o640
    assert os.readlink(tmp_path / "link") == str(tmp_path / "etc" / "a.conf")


def test_a_failing_command_names_what_it_did_or_says_its_own_failure():
    boom = ("sh", "-c", "echo boom >&2; exit 3")
    with pytest.raises(CommandError, match="linking x failed with exit code 3") as plain:
        Command(boom, "linking x").run(LocalTransport())
    assert "boom" in plain.value.evidence
    with pytest.raises(StepError, match=r"systemctl could not start x \(exit code 3\)") as own:
        Command(boom, "starting x", failure="systemctl could not start x", hint="see journalctl").run(LocalTransport())
    assert "boom" in own.value.evidence and own.value.hint == "see journalctl"


def test_a_check_run_carries_the_commands_of_what_would_change_and_an_applying_run_none(tmp_path):
    path = str(tmp_path / "a.conf")
    role = RolePlan("demo", [File(path, "port=1\n")])
    seen = Collect()
    run_target(CountingTransport(), [role], check=True, emit=seen, state_dir=str(tmp_path / "state"))
    (changed,) = [e for e in seen.events if isinstance(e, Event) and e.status == "changed"]
    assert changed.commands == (File(path, "port=1\n").commands()[0].shown(),)
    assert changed.to_dict()["commands"] == list(changed.commands)
    applied = Collect()
    run_target(CountingTransport(), [role], emit=applied, state_dir=str(tmp_path / "state"))
    assert all(not e.commands for e in applied.events if isinstance(e, Event))


def test_commands_are_printed_only_when_asked():
    event = Event("step", "kpro6/200", "demo", "file:/etc/a", "changed", "create /etc/a", 0.0, "", True,
                  ("sh -c 'write' sh /etc/a 644 '' 1a2b  # stdin: 7 bytes",))
    venv = Event("step", "kpro6/200", "engine", "venv:/opt/v", "changed", "create venv", 0.0, "", True)

    def render(commands: bool) -> str:
        out = io.StringIO()
        report = HumanReport(Console(file=out, width=200, color_system=None), commands=commands)
        report(event)
        report(venv)
        return out.getvalue()

    assert "$ sh -c 'write' sh /etc/a 644 '' 1a2b  # stdin: 7 bytes" in render(True)
    shown = render(True)
    assert "             (its apply is code, not a list of commands)" in shown
    assert "$ (its apply" not in shown
    assert "$ " not in render(False)


def test_files_and_units_are_written_through_the_transports_own_write_file(tmp_path):
    # A transport may write files its own way (the lab's cut-mid-upload test hooks in there); its
    # default runs exactly the File's command.
    class Writes(LocalTransport):
        def __init__(self) -> None:
            super().__init__()
            self.written: list[str] = []

        def write_file(self, dest, data, **kwargs):
            self.written.append(dest)
            return super().write_file(dest, data, **kwargs)

    target = Writes()
    File(str(tmp_path / "a.conf"), "port=1\n").apply(target)
    Unit("gpunode-x.service", content="[Service]\nExecStart=/bin/true\n", directory=str(tmp_path)).apply(target)
    assert target.written == [str(tmp_path / "a.conf"), str(tmp_path / "gpunode-x.service")]
    assert (tmp_path / "gpunode-x.service").read_text() == "[Service]\nExecStart=/bin/true\n"


def test_every_shipped_step_either_says_its_commands_or_has_its_own_apply():
    # apply is no longer abstract (its default runs commands()), so this is what keeps a step
    # that has neither from failing only when a run reaches it.
    import importlib
    import inspect
    import pkgutil

    import gpunode.steps
    from gpunode.steps.base import Step

    kinds = {cls for info in pkgutil.iter_modules(gpunode.steps.__path__)
             for _, cls in inspect.getmembers(importlib.import_module(f"gpunode.steps.{info.name}"), inspect.isclass)
             if issubclass(cls, Step) and cls is not Step}
    assert len(kinds) >= 15
    assert not [k.__name__ for k in kinds if k.apply is Step.apply and k.commands is Step.commands]


def test_an_exit_code_with_a_meaning_of_its_own_reads_as_that_meaning():
    exits = ((3, "libfoo.so.1 is not installed", "install the driver"),)
    with pytest.raises(StepError, match="libfoo.so.1 is not installed") as known:
        Command(("sh", "-c", "exit 3"), "linking foo", failure="linking foo failed", exits=exits).run(LocalTransport())
    assert known.value.hint == "install the driver"
    with pytest.raises(StepError, match=r"linking foo failed \(exit code 4\)"):
        Command(("sh", "-c", "exit 4"), "linking foo", failure="linking foo failed", exits=exits).run(LocalTransport())
    link = LibcudaLink().commands()[0]
    assert link.argv == tuple(shell.sh(_LIBCUDA_APPLY)) and [code for code, _, _ in link.exits] == [3]


def test_a_failure_brings_the_output_of_its_evidence_command():
    failing = Command(("sh", "-c", "echo 'Job failed'; exit 1"), "restarting x", failure="`systemctl restart x` failed",
                      evidence=("echo", "Active: failed (Result: exit-code)"))
    with pytest.raises(StepError) as info:
        failing.run(LocalTransport())
    assert info.value.evidence.splitlines() == ["Job failed", "--- echo 'Active: failed (Result: exit-code)':",
                                                "Active: failed (Result: exit-code)"]
    with pytest.raises(StepError, match=r"restarting y failed \(exit code 1\)") as bare:
        Command(("false",), "restarting y", evidence=("echo", "y: inactive")).run(LocalTransport())
    assert bare.value.evidence.endswith("y: inactive")  # evidence without a failure text still comes
    target = CountingTransport()
    Command(("true",), "nothing", evidence=("false",)).run(target)
    assert target.commands == [["true"]]  # only a failure pays for the evidence


def test_a_watched_command_streams_into_its_sink_and_fails_with_what_the_sink_kept():
    progress: list[tuple[int, int]] = []
    sink = ProgressSink(lambda done, total, _name="": progress.append((done, total)))
    script = "printf '@@progress 1 2 a\\nunpacking a\\n@@progress 2 2 b\\n'; printf 'no space left'; exit 100"
    with pytest.raises(StepError, match=r"apt-get could not install a \(exit code 100\)") as info:
        Command(("sh", "-c", script), "installing a", failure="apt-get could not install a").run(LocalTransport(), sink)
    assert progress == [(1, 2), (2, 2)]
    assert info.value.evidence == "unpacking a\nno space left"  # the unfinished last line is flushed in


def test_apt_removal_and_the_libcuda_link_say_their_commands():
    apt = Packages(["curl", "python3-venv"]).commands()[0]
    assert apt.argv == tuple(shell.sh(_APT_INSTALL, "curl", "python3-venv"))
    assert apt.failure == "apt-get could not install curl, python3-venv"
    assert Absent("/var/cache/gpunode/jit").commands() == [
        Command(("rm", "-rf", "--", "/var/cache/gpunode/jit"), "removing /var/cache/gpunode/jit")]
    assert Absent("~/.cache/flashinfer").commands()[0].argv[-1] == "/root/.cache/flashinfer"


@pytest.mark.parametrize("path", ["/", "//", "~/", "/root/", ""])
def test_absent_refuses_root_and_roots_home_at_check_time(path):
    step = Absent(path)
    with pytest.raises(StepError, match="refusing to remove"):
        step.check(Probe(0, "12G\n"))
    with pytest.raises(StepError, match="refusing to remove"):
        step.apply(LocalTransport())


def test_handlers_say_their_commands_and_a_check_run_carries_them(tmp_path):
    restart = SystemctlHandler("restart:gpunode-cpu0.service", "restart", "gpunode-cpu0.service").commands()
    assert [c.shown() for c in restart] == ["systemctl restart gpunode-cpu0.service"]
    assert restart[0].evidence == ("systemctl", "status", "--no-pager", "--lines=20", "gpunode-cpu0.service")
    assert [c.shown() for c in generic("daemon-reload").commands()] == ["systemctl daemon-reload"]

    role = RolePlan("demo", [File(str(tmp_path / "a.conf"), "port=1\n", notify=["mark"])],
                    handlers={"mark": CommandHandler("mark", ("touch", str(tmp_path / "fired")))})
    seen = Collect()
    run_target(CountingTransport(), [role], check=True, emit=seen, state_dir=str(tmp_path / "state"))
    (handler,) = [e for e in seen.events if isinstance(e, Event) and e.kind == "handler"]
    assert handler.status == "changed" and handler.commands == (f"touch {tmp_path / 'fired'}",)
    assert not (tmp_path / "fired").exists()

    out = io.StringIO()
    HumanReport(Console(file=out, width=200, color_system=None), commands=True)(handler)
    assert f"$ touch {tmp_path / 'fired'}" in out.getvalue()


def test_staging_overlays_and_port_waits_say_their_commands():
    stage = StagedWeights("/mnt/models/qwen", "/dev/shm/qwen", verify="sha256").commands()
    assert [c.argv for c in stage] == [("sh", STAGE_SCRIPT, "/mnt/models/qwen", "/dev/shm/qwen", "sha256")]
    overlay = Overlay("/usr/local/cuda/include", ["/v/cccl/cub", "/v/cccl/thrust"]).commands()[0]
    assert overlay.argv == tuple(shell.sh(_OVERLAY_APPLY, "/usr/local/cuda/include", "/v/cccl/cub", "/v/cccl/thrust"))
    assert [code for code, _, _ in overlay.exits] == [3]
    wait = Answering(["http://127.0.0.1:9/"], units=["web.service"], grace_s=5).commands()[0]
    assert wait.timeout == 35 and wait.evidence[-2:] == ("-u", "web.service")


def test_a_port_that_never_answers_fails_naming_it(tmp_path):
    step = Answering(["http://127.0.0.1:9/"], grace_s=0)
    with pytest.raises(StepError, match=r"not every URL answered with 200 within 0s \(exit code 4\)") as info:
        step.apply(LocalTransport())
    assert "no answer with 200 from http://127.0.0.1:9/" in info.value.evidence


def test_a_service_and_a_unit_check_read_as_the_systemctl_commands_they_run():
    """--commands shows what pyinfra would (`systemctl start x`), not the 7-line script that makes it
    safe to repeat; the script itself stays what runs (its argv)."""
    from gpunode.steps.systemd import Service, verify_command

    (start,) = Service("gpunode-cpu0.service").commands()
    assert start.shown() == ("systemctl enable gpunode-cpu0.service && systemctl start gpunode-cpu0.service"
                             "  # after a daemon-reload where systemd asks for one")
    assert start.argv[:2] == ("sh", "-c") and "systemctl start" in start.argv[2]
    (stop,) = Service("gpunode-cpu1.service", enabled=None, running=False).commands()
    assert stop.shown().startswith("systemctl stop gpunode-cpu1.service  #")
    shown = verify_command("gpunode-cpu0.service", b"[Unit]\n").shown()
    assert shown == "systemd-analyze verify /run/gpunode-verify.XXXXXX/gpunode-cpu0.service  # stdin: 7 bytes"
    assert "\n" not in start.shown() + shown
