"""What an Ansible or pyinfra user types (issue 43), through the installed `gpunode` console script,
a real process with its real stdout/stderr: each works with the meaning they know, or is refused
naming what to use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GPUNODE = Path(sys.executable).parent / "gpunode"

INVENTORY = """\
hosts:
  lab:
    address: 127.0.0.1
    port: 1
    containers:
      200: {vars: {model_source: /mnt/models/m}}
"""


def gpunode(*argv: str, cwd: Path, stdin=subprocess.DEVNULL, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("GPUNODE_") and k not in ("PVE_TOKEN_SECRET",)}
    base.update(HOME=str(cwd), XDG_CACHE_HOME=str(cwd / ".cache"), COLUMNS="80", **(env or {}))
    # start_new_session: no controlling terminal, as under cron or a CI runner
    return subprocess.run([str(GPUNODE), *argv], cwd=cwd, env=base, stdin=stdin, capture_output=True, text=True,
                          timeout=60, start_new_session=True)


def site(tmp_path: Path) -> Path:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yml").write_text(INVENTORY)
    return tmp_path / "inv"


def test_ask_become_pass_without_a_terminal_is_a_clear_refusal(tmp_path):
    inv = site(tmp_path)
    got = gpunode("provision", "-i", str(inv), "--host", "lab", "--ct", "200", "-K", cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "-K/--ask-become-pass: there is no terminal" in got.stderr
    assert "GPUNODE_BECOME_PASSWORD" in got.stderr
    assert "EOFError" not in got.stderr and "internal error" not in got.stderr


def test_ask_become_pass_reads_a_password_piped_in_without_a_terminal(tmp_path):
    """A script pipes the password to -K (getpass reads stdin's line): taken, the run goes on to connect."""
    inv = site(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")} | {"HOME": str(tmp_path)}
    got = subprocess.run([str(GPUNODE), "provision", "-i", str(inv), "--host", "lab", "--ct", "200", "-K", "--check"],
                         cwd=tmp_path, input="s3cret-pw\n", capture_output=True, text=True, timeout=60,
                         start_new_session=True, env=env)
    assert "-K/--ask-become-pass" not in got.stderr, got.stderr
    assert "cannot reach" in got.stderr + got.stdout and got.returncode == 4, got.stdout + got.stderr
    assert "s3cret-pw" not in got.stdout + got.stderr


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """The console script's own function, in this process: exit code, stdout, stderr."""
    from gpunode.cli.main import main

    code: object = 0
    try:
        main(["gpunode", *argv])  # a task that succeeds returns; any other ends in SystemExit
    except SystemExit as done:
        code = done.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 1 if code else 0), out.out, out.err


INVOKE_ONLY = ["-R, --dry", "-e, --echo", "-w, --warn-only", "--hide", "-p, --pty", "--prompt-for-sudo-password",
               "-f STRING, --config", "-T INT, --command-timeout", "-d, --debug", "--write-pyc"]


def test_help_shows_only_options_that_do_something(capsys):
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    core = out.split("Subcommands:")[0]
    for gone in INVOKE_ONLY:
        assert gone not in core, gone
    for kept in ("-h [STRING], --help", "-V, --version", "-l [STRING], --list", "-b, --become", "-u STRING, --user",
                 "--list-hosts"):
        assert kept in core, kept


def test_invoke_and_other_tools_options_are_refused_naming_what_to_use(capsys):
    for argv, said in ((["provision", "-R"], "-C/--check"), (["provision", "--pty"], "never need a terminal"),
                       (["provision", "-w"], "the others go on"),
                       (["provision", "--prompt-for-sudo-password"], "-K/--ask-become-pass"),
                       (["provision", "--private-key", "k"], "`key:`"),
                       (["provision", "--vault-password-file", "f"], "ansible-inventory"),
                       (["status", "--debug"], "-vvv")):
        code, _, err = run(argv, capsys)
        assert code == 2 and said in err, (argv, err)
        assert "No idea what" not in err


def test_dry_is_check_mode_as_pyinfra_means_it(tmp_path, capsys, monkeypatch):
    """`--dry` once made a real run ("check": false); now it is --check, seen in the run's own recap."""
    inv = site(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = run(["provision", "-i", str(inv), "--host", "lab", "--ct", "200", "--dry", "--json"], capsys)
    import json

    recap = json.loads(out.splitlines()[-1])
    assert code == 4 and recap["type"] == "recap" and recap["check"] is True  # port 1: unreachable, in check mode


def test_dry_before_the_task_as_pyinfra_places_it_says_where_it_goes(tmp_path):
    """`gpunode --dry provision ...` (pyinfra's order) said "no option --check here", an option never typed."""
    inv = site(tmp_path)
    done = gpunode("--dry", "provision", "-i", str(inv), "--host", "lab", "--ct", "200", cwd=tmp_path)
    assert done.returncode == 2
    assert "--dry is an option of the task, not of gpunode: put it after the task's name" in done.stderr, done.stderr
    assert "gpunode provision --dry" in done.stderr and "--check" not in done.stderr


def test_a_task_option_before_the_task_is_placed_after_the_task_named_and_nowhere_else(tmp_path):
    done = gpunode("--forks", "3", "status", cwd=tmp_path)
    assert done.returncode == 2 and "hint: `gpunode status --forks ...`" in done.stderr, done.stderr
    after = gpunode("status", "--check", cwd=tmp_path)  # after the task: the task has no such option
    assert after.returncode == 2 and "error: no option --check here" in after.stderr, after.stderr


def test_list_hosts_user_and_become_as_ansible_playbook(tmp_path, capsys, monkeypatch):
    inv = site(tmp_path)
    (inv / "hosts.yml").write_text(INVENTORY + "  box:\n    address: 127.0.0.1\n    port: 1\n")
    code, out, _ = run(["provision", "-i", str(inv), "--limit", "lab*,box", "--list-hosts"], capsys)
    assert code == 0 and out == "  hosts (2):\n    lab/200\n    box\n"

    from gpunode.cli import common, habits

    seen = {}
    real = common.select_targets

    def spy(*a, **kw):
        seen["targets"] = real(*a, **kw)
        raise SystemExit(0)

    monkeypatch.setattr(common, "select_targets", spy)
    monkeypatch.setattr("gpunode.cli.provision.select_targets", spy)
    run(["provision", "-i", str(inv), "--limit", "box", "-b", "-u", "deploy"], capsys)
    (box,) = seen["targets"]
    assert (box.host.user, box.host.become, box.host.become_user) == ("deploy", True, "root")
    run(["provision", "-i", str(inv), "--limit", "box", "--become-user", "svc"], capsys)
    (box,) = seen["targets"]
    assert (box.host.user, box.host.become, box.host.become_user) == ("root", True, "svc")
    assert habits.given.user is None


def test_tags_is_only(tmp_path, capsys):
    inv = site(tmp_path)
    code, _, err = run(["provision", "-i", str(inv), "--host", "lab", "--ct", "200", "--tags", "nosuchrole"], capsys)
    assert code == 2 and "nosuchrole" in err


def test_skip_tags_runs_every_other_role_and_checks_its_names(tmp_path, capsys, monkeypatch):
    inv = site(tmp_path)
    code, _, err = run(["provision", "-i", str(inv), "--host", "lab", "--ct", "200", "--skip-tags", "wieghts"], capsys)
    assert code == 2 and "--skip-tags: unknown role 'wieghts'" in err and "cannot reach" not in err
    seen = {}
    from gpunode import pipeline

    def prepare(target, transport, only=None, **kw):
        seen["only"] = only
        raise SystemExit(0)

    monkeypatch.setattr(pipeline, "prepare", prepare)
    run(["provision", "-i", str(inv), "--host", "lab", "--ct", "200", "--skip-tags", "weights,cuda_fixes"], capsys)
    from gpunode import roles

    assert seen["only"] == ",".join(r for r in roles.order() if r not in ("weights", "cuda_fixes"))


def test_hints_name_the_command_the_user_ran_with_their_inventory(tmp_path, capsys):
    inv = site(tmp_path)
    code, _, err = run(["onboard", "-i", str(inv), "--host", "lab"], capsys)
    assert code == 2 and f"hint: e.g. gpunode onboard -i {inv} --host kpro6 --ct 203 --check" in err, err

    from pathlib import Path as P

    from gpunode.cli import habits
    from gpunode.transport.hostkeys import trust_hint

    habits.program, habits.inventory_typed = "gpunode", "my-site"
    said = habits.as_typed(f"error: lab: unknown host key\nhint: {trust_hint('lab', None, P('k'))}")
    assert said.endswith("`gpunode hostkeys.trust -i my-site --host lab` or pin host_key in the inventory")
    habits.program = "inv"  # tasks.py's: the same hint as a checkout's user types it
    assert "`inv hostkeys.trust -i my-site --host lab`" in habits.as_typed(f"hint: {trust_hint('lab', None, P('k'))}")
    # what another run recorded (a lock holder's command line) is quoted as it was, not rewritten
    assert habits.as_typed("error: locked by bob running inv provision") == "error: locked by bob running inv provision"
    habits.inventory_typed = None
