"""Become (issue 30): log in as a user without root rights and run every command through sudo,
as rented GPU hosts want (`ubuntu` with sudo). A real OpenSSH server of this module lets in the
user `gpunode-become`, made for these tests with a sudoers rule of their own; through it,
`inv provision --check` reaches the lab's container 200 with `sudo pct exec`. Needs sudo on the
lab host (Debian's package)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from gpunode.errors import ConnectError
from gpunode.transport import SshSettings, SshTransport
from gpunode_lab import paths
from tests.lab.provision_helpers import INV, REPO, cpu_vars, lab_host
from tests.unit.sshd_helpers import keygen, start_sshd

pytestmark = pytest.mark.lab

USER = "gpunode-become"
PASSWORD = "correct horse battery 7"  # this test user's only: made and removed here
SUDOERS = Path("/etc/sudoers.d/gpunode-become-test")


@pytest.fixture(scope="module")
def user(lab):
    if shutil.which("sudo") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sudo is not installed on the lab host (apt-get install sudo)", pytrace=False)
        pytest.skip("sudo is not installed (apt-get install sudo)")
    subprocess.run(["userdel", USER], capture_output=True)
    subprocess.run(["useradd", "-M", "-d", "/nonexistent", "-s", "/bin/sh", USER], check=True)
    subprocess.run(["chpasswd"], input=f"{USER}:{PASSWORD}\n", text=True, check=True)
    yield USER
    SUDOERS.unlink(missing_ok=True)
    end_processes(USER)
    subprocess.run(["userdel", USER], check=True)


def end_processes(user: str) -> None:
    """The last login's session can outlive sshd's stop by a moment, and userdel refuses a user that
    still runs a process (it did once in a full run): end them, and wait until /proc shows none."""
    uid = pwd.getpwnam(user).pw_uid
    deadline = time.monotonic() + 10
    while pids := [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and owner(p) == uid]:
        assert time.monotonic() < deadline, f"processes of {user} still running: {pids}"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def owner(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except FileNotFoundError:
        return None


def rule(text: str) -> None:
    """This test's sudoers rule, checked by visudo before sudo reads it."""
    tmp = SUDOERS.with_name(".gpunode-become-test.new")
    tmp.write_text(f"{USER} ALL=(ALL) {text}\n")
    tmp.chmod(0o440)
    subprocess.run(["visudo", "-cqf", str(tmp)], check=True)
    tmp.rename(SUDOERS)


@pytest.fixture(scope="module")
def server(user):
    # the user reads its authorized_keys itself: a folder it may enter, not pytest's 0700 one
    folder = Path(tempfile.mkdtemp(prefix="gpunode-become-"))
    folder.chmod(0o755)
    client = folder / "client_key"
    kind, blob = keygen(client)
    authorized = folder / "authorized_keys"
    authorized.write_text(f"{kind} {blob}\n")
    authorized.chmod(0o644)
    sshd = start_sshd(folder / "sshd", "127.0.0.4", authorized, users=(USER,))
    known = folder / "known_hosts"
    known.write_text(sshd.known_line())
    yield sshd, client, known, folder
    sshd.stop()
    shutil.rmtree(folder)


def settings(server, **kw) -> SshSettings:
    sshd, client, known, _ = server
    return SshSettings(name="rented", address=sshd.address, port=sshd.port, user=USER, key_file=str(client),
                       known_hosts=(str(known),), connect_timeout=5, **kw)


@pytest.fixture
def inventory(server, tmp_path) -> Path:
    sshd, client, known, _ = server
    host = {"address": sshd.address, "port": sshd.port, "user": USER, "key": str(client),
            "known_hosts": str(known), "become": True, "pct_path": lab_host()["pct_path"],
            "containers": {paths.CT_CPU: {"vars": cpu_vars()}}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"hosts": {"rented": host}}, sort_keys=False))
    return path


def check(inventory: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""):
    done = subprocess.run([str(INV), "provision", "-i", str(inventory), "--host", "rented", "--ct",
                           str(paths.CT_CPU), "--check", "--json", *args], cwd=REPO, capture_output=True, text=True,
                          input=stdin, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "GPUNODE_BECOME_PASSWORD"} | (env or {}))
    lines = [yaml.safe_load(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, (lines[-1] if lines and lines[-1]["type"] == "recap" else None)


def test_without_become_the_user_is_itself_and_with_it_root(server):
    rule("NOPASSWD: ALL")
    plain = SshTransport(settings(server))
    assert plain.run(["id", "-un"], check=True).stdout == f"{USER}\n"
    plain.close()
    root = SshTransport(settings(server, become=True))
    assert root.run(["id", "-un"], check=True).stdout == "root\n"
    # stdin still reaches the command whole (files are written through it)
    assert root.run(["sh", "-c", "cat; id -u"], stdin=b"line one\nline two\n", check=True).stdout == \
        "line one\nline two\n0\n"
    root.close()


def test_provision_check_reaches_the_container_through_sudo_without_a_password(inventory):
    rule("NOPASSWD: ALL")
    done, recap = check(inventory)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert recap["succeeded"] and recap["targets"][0]["target"] == f"rented/{paths.CT_CPU}"


def test_a_password_rule_without_a_password_is_unreachable_and_says_how_to_give_one(inventory):
    rule("ALL")
    done, recap = check(inventory)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    error = recap["targets"][0]["error"]
    assert f"become: sudo on 127.0.0.4 needs {USER}'s password" in error and "-K" in error, error


def test_the_password_from_the_environment_or_the_prompt_and_never_in_the_output(server, inventory, monkeypatch):
    rule("ALL")
    done, recap = check(inventory, env={"GPUNODE_BECOME_PASSWORD": PASSWORD})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done, recap = check(inventory, "-K", stdin=PASSWORD + "\n")  # no terminal: getpass reads stdin
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert PASSWORD not in done.stdout + done.stderr
    monkeypatch.setenv("GPUNODE_BECOME_PASSWORD", PASSWORD)
    t = SshTransport(settings(server, become=True))
    # the password is stdin's first line, for sudo; the command reads the rest
    assert t.run(["sh", "-c", "cat; id -u"], stdin=b"data\n", check=True).stdout == "data\n0\n"
    t.close()


def test_a_wrong_password_is_refused_once_and_not_shown(inventory, server):
    rule("ALL")
    wrong = "not the password 42"
    done, recap = check(inventory, env={"GPUNODE_BECOME_PASSWORD": wrong})
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    error = recap["targets"][0]["error"]
    assert f"sudo on 127.0.0.4 refused the password for {USER}" in error, error
    assert wrong not in done.stdout + done.stderr


def test_a_user_sudo_does_not_know_is_told_what_to_do(server, monkeypatch):
    SUDOERS.unlink(missing_ok=True)
    with pytest.raises(ConnectError, match=f"needs {USER}'s password"):  # sudo asks before it reads the rules
        SshTransport(settings(server, become=True)).run(["true"])
    monkeypatch.setenv("GPUNODE_BECOME_PASSWORD", PASSWORD)
    with pytest.raises(ConnectError, match=f"become: {USER} may not `sudo -u root` on 127.0.0.4") as err:
        SshTransport(settings(server, become=True)).run(["true"])
    assert "sudoers" in err.value.hint and "is not in the sudoers file" in err.value.evidence


def test_a_password_sudo_did_not_read_never_reaches_the_command(server, monkeypatch):
    """issue 41: a NOPASSWD rule for the command (here cat, and the gate's sh) makes sudo skip the
    password line: it must not become the command's stdin (with `sh -s` it would run as root)."""
    rule(f"ALL\n{USER} ALL=(ALL) NOPASSWD: /usr/bin/cat, /bin/cat, /usr/bin/sh, /bin/sh")
    monkeypatch.setenv("GPUNODE_BECOME_PASSWORD", PASSWORD)
    t = SshTransport(settings(server, become=True))  # `sudo -n true` asks for a password: -S with the line
    with pytest.raises(ConnectError, match="runs `sh` without one") as err:
        t.run(["cat"], stdin=b"data\n")  # on main: stdout was the password, then data
    t.close()
    assert PASSWORD not in str(err.value) and "NOPASSWD: ALL" in err.value.hint
