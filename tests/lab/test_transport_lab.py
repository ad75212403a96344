"""Transports against the real lab: SSH (paramiko/Fabric) -> pct stand-in -> lxc-attach -> env.

(1) what goes in comes out: argv, stdin bytes, files, trees;
(2) every way the chain can fail says so in a sentence a person can act on.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpunode.errors import CommandError, ConnectError, HostKeyError
from gpunode.transport import PctTransport, SshTransport
from gpunode_lab import paths
from tests.lab.conftest import lab_settings

pytestmark = pytest.mark.lab

# A program in the container that writes back its argv, NUL-terminated (printf is dash's builtin).
ECHO_ARGV = ["sh", "-c", 'for a in "$@"; do printf "%s\\000" "$a"; done', "echo-argv"]

# Arguments argv can carry: anything but NUL (and lone surrogates, which are not text).
any_arg = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)
tricky = st.sampled_from(["", "-", "--", "-la", "--keep-env", "0", "$(id)", "`id`", "${HOME}", "'", '"', "\\",
                          "\\\\n", "\n", "a\nb", " ", "\t", "*", "~", ";", "&&", "|", ">x", "ü✓ 中文", "\x1b[31m"])


def echoed(transport, args: list[str]) -> list[str]:
    sink = io.BytesIO()
    result = transport.run([*ECHO_ARGV, *args], sink=sink)
    assert result.exit_code == 0, result.stderr
    out = sink.getvalue()
    assert out.endswith(b"\0") or not args
    return [a.decode("utf-8") for a in out.split(b"\0")[:-1]]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(any_arg, tricky), max_size=8))
@example([])
@example([""])
@example(["", "", ""])
@example(["--", "-la", "--keep-env", "0"])
@example(["it's", 'say "hi"', "$(touch /tmp/pwned)", "back\\slash", "new\nline", "ünïcødé ✓"])
def test_argv_arrives_unchanged_through_ssh_pct_and_env(ct, args):
    assert echoed(ct, args) == args


def test_argv_really_crosses_ssh_and_pct(ct, host_transport):
    before = host_transport.commands_run
    assert echoed(ct, ["x"]) == ["x"]
    assert host_transport.commands_run == before + 1
    # ... and lands in the container, not on the host.
    assert ct.run(["hostname"], check=True).stdout.strip() == "lab-cpu"


@pytest.mark.parametrize("size", [0, 1, 255, 65536 + 7, 6 * 1024 * 1024 + 3], ids=lambda n: f"{n}B")
def test_stdin_bytes_round_trip_exactly(ct, size):
    data = os.urandom(size)
    sink = io.BytesIO()
    result = ct.run(["cat"], stdin=data, sink=sink)
    assert result.exit_code == 0, result.stderr
    assert sink.getvalue() == data


def test_stdin_streams_from_a_file_object(ct, tmp_path):
    """Several MB from a file object are streamed in chunks; the container hashes what it got."""
    src = tmp_path / "blob"
    with open(src, "wb") as f:
        for _ in range(12):
            f.write(os.urandom(1 << 20))
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    with open(src, "rb") as f:
        result = ct.run(["sha256sum"], stdin=f, check=True)
    assert result.stdout.split()[0] == want


def test_binary_stdout_with_every_byte_value(ct):
    data = bytes(range(256)) * 3
    sink = io.BytesIO()
    ct.run(["cat"], stdin=data, sink=sink, check=True)
    assert sink.getvalue() == data


def test_exit_codes_and_stderr_come_back(ct):
    result = ct.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")


def test_container_env_is_the_transports_not_the_hosts(ct):
    env = dict(line.split("=", 1) for line in ct.run(["env"], check=True).stdout.splitlines())
    assert env["PATH"].startswith("/usr/local/sbin:")
    assert env["LANG"] == "C.UTF-8"
    assert "SSH_CLIENT" not in env and "SHLVL" not in env


@pytest.fixture
def ct_dir(ct):
    path = f"/tmp/gpunode-test-{uuid.uuid4().hex[:8]}"
    yield path
    ct.run(["rm", "-rf", "--", path])


def leftovers(ct, folder: str) -> list[str]:
    return ct.run(["sh", "-c", 'ls -A "$1" | grep "^\\.gpunode\\." || true', "sh", folder]).stdout.split()


def test_write_file_is_atomic_and_leaves_no_temp_file(ct, ct_dir):
    dest = f"{ct_dir}/sub/conf.bin"
    first = os.urandom(5000) + b"\0\n\r\xff"
    ct.write_file(dest, first, mode=0o640)
    assert ct.read_file(dest) == first
    assert ct.run(["stat", "-c", "%a %U", dest], check=True).stdout.split() == ["640", "root"]
    inode = ct.run(["stat", "-c", "%i", dest], check=True).stdout
    second = b"second version\n"
    ct.write_file(dest, io.BytesIO(second), sha256=hashlib.sha256(second).hexdigest())
    assert ct.read_file(dest) == second
    # Replaced by rename (a new inode), never rewritten in place.
    assert ct.run(["stat", "-c", "%i", dest], check=True).stdout != inode
    assert leftovers(ct, f"{ct_dir}/sub") == []


def test_failed_write_keeps_the_old_file_and_no_temp_file(ct, ct_dir):
    dest = f"{ct_dir}/keep.txt"
    ct.write_file(dest, b"old\n")
    with pytest.raises(CommandError):
        ct.write_file(dest, b"new\n", owner="no-such-user-here")
    with pytest.raises(CommandError, match="sha256"):
        ct.write_file(dest, b"new\n", sha256="0" * 64)
    assert ct.read_file(dest) == b"old\n"
    assert leftovers(ct, ct_dir) == []


def test_write_file_of_zero_bytes(ct, ct_dir):
    ct.write_file(f"{ct_dir}/empty", b"")
    assert ct.run(["stat", "-c", "%s", f"{ct_dir}/empty"], check=True).stdout.strip() == "0"


def make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "a.txt": b"alpha\n",
        "empty": b"",
        "bin/blob.bin": os.urandom(300_000),
        "deep/er/still/x": b"x",
        "spaces and 'quotes'/ünï.txt": "ünï\n".encode(),
        "-dash": b"leading dash\n",
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "run.sh").chmod(0o755)
    files["bin/run.sh"] = b"#!/bin/sh\necho hi\n"
    (root / "link").symlink_to("a.txt")
    return files


def test_put_tree_and_get_tree_round_trip(ct, ct_dir, tmp_path):
    src, back = tmp_path / "src", tmp_path / "back"
    files = make_tree(src)
    ct.put_tree(src, ct_dir)
    assert ct.run(["sh", "-c", 'cd "$1" && ./bin/run.sh', "sh", ct_dir], check=True).stdout == "hi\n"
    ct.get_tree(ct_dir, back)
    got = {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file() and not p.is_symlink()}
    assert got == files
    assert os.readlink(back / "link") == "a.txt"
    assert os.access(back / "bin" / "run.sh", os.X_OK)


# -- (2) failures, each with its own sentence --------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_fingerprint() -> str:
    out = subprocess.run(["ssh-keygen", "-lf", f"{paths.HOST_KEY}.pub"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def test_host_unreachable(lab):
    port = closed_port()
    t = SshTransport(lab_settings(port=port))
    with pytest.raises(ConnectError, match=rf"cannot reach root@127\.0\.0\.1:{port}") as err:
        t.run(["true"])
    assert "sshd runs" in err.value.hint


def test_auth_refused_with_a_key_the_host_does_not_know(lab, tmp_path):
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    t = SshTransport(lab_settings(key_file=str(key)))
    with pytest.raises(ConnectError, match=r"authentication refused by root@127\.0\.0\.1:2222") as err:
        t.run(["true"])
    assert str(key) in err.value.hint
    assert not isinstance(err.value, HostKeyError)


def test_unknown_host_key_is_refused_and_its_fingerprint_shown(lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport(lab_settings(known_hosts=(str(empty),)))
    with pytest.raises(HostKeyError, match="unknown host key") as err:
        t.run(["true"])
    assert host_fingerprint() in str(err.value)
    assert "hostkeys.trust" in err.value.hint


def test_pinned_fingerprint_that_does_not_match(lab, tmp_path):
    wrong = "SHA256:" + "A" * 43
    # Key known from known_hosts, but the inventory pins another one.
    t = SshTransport(lab_settings(host_key=wrong))
    with pytest.raises(HostKeyError, match=re.escape("but the inventory pins " + wrong)) as err:
        t.run(["true"])
    assert host_fingerprint() in str(err.value)
    # Key not in known_hosts at all, pin wrong: refused as well, showing what the host offered.
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport(lab_settings(host_key=wrong, known_hosts=(str(empty),)))
    with pytest.raises(HostKeyError, match=re.escape(host_fingerprint())):
        t.run(["true"])


def test_pinned_fingerprint_that_matches_connects(lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport(lab_settings(host_key=host_fingerprint(), known_hosts=(str(empty),)))
    assert t.run(["echo", "ok"], check=True).stdout == "ok\n"
    t.close()


def test_known_hosts_with_another_key_for_the_host(lab, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, blob = (tmp_path / "other.pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:2222 {kind} {blob}\n")
    t = SshTransport(lab_settings(known_hosts=(str(kh),)))
    with pytest.raises(HostKeyError, match="CHANGED") as err:
        t.run(["true"])
    assert host_fingerprint() in str(err.value)


def test_pct_missing_on_the_host(host_transport):
    t = PctTransport(host_transport, 200, pct="/nonexistent/sbin/pct", host_name="lab")
    with pytest.raises(ConnectError, match=r"pct is not installed on lab \(looked for /nonexistent/sbin/pct\)"):
        t.run(["true"])


def test_container_missing(host_transport):
    t = PctTransport(host_transport, 999, pct=str(paths.PCT), host_name="lab")
    with pytest.raises(ConnectError, match="container 999 on lab does not exist") as err:
        t.run(["true"])
    assert "Configuration file 'nodes/lab/lxc/999.conf' does not exist" in err.value.evidence
    assert "pct list" in err.value.hint


def test_container_stopped(host_transport):
    t = PctTransport(host_transport, paths.CT_STOPPED, pct=str(paths.PCT), host_name="lab")
    with pytest.raises(ConnectError, match="container 202 on lab is not running") as err:
        t.run(["true"])
    assert "container '202' not running!" in err.value.evidence
    assert "pct start 202" in err.value.hint


def test_command_not_found_in_the_container(ct):
    with pytest.raises(ConnectError, match="command `no-such-command-gpunode` not found in container 200 on lab"):
        ct.run(["no-such-command-gpunode", "--version"])


def test_a_failing_command_is_not_a_transport_error(ct):
    result = ct.run(["ls", "/no/such/path"])
    assert result.exit_code == 2 and "No such file or directory" in result.stderr
    with pytest.raises(CommandError, match="exit code 2"):
        result.check()


def test_hold_keeps_a_process_until_released(ct):
    held = ct.hold(["sh", "-c", 'echo ready; cat >/dev/null; echo gone > /tmp/gpunode-hold-test'])
    assert held.first_line == "ready"
    assert ct.run(["test", "-e", "/tmp/gpunode-hold-test"]).exit_code == 1
    held.release()
    assert ct.run(["cat", "/tmp/gpunode-hold-test"], check=True).stdout == "gone\n"
    ct.run(["rm", "-f", "/tmp/gpunode-hold-test"])


def test_timeout_stops_the_command_in_the_container_too(ct):
    result = ct.run(["sh", "-c", "echo started; exec sleep 37"], timeout=1.5)
    assert result.exit_code == 124
    assert result.stdout == "started\n" and "timed out after 1.5 s" in result.stderr
    left = ct.run(["sh", "-c", "pgrep -af 'slee[p] 37' || true"]).stdout  # [p]: not pgrep's own sh
    assert "sleep 37" not in left


def test_timeout_keeps_argv_and_exit_codes(ct):
    assert echoed(ct, []) == []
    sink = io.BytesIO()
    r = ct.run([*ECHO_ARGV, "-k", "5", "--", "x y"], sink=sink, timeout=30)
    assert r.exit_code == 0 and sink.getvalue() == b"-k\x005\x00--\x00x y\x00"
    assert ct.run(["sh", "-c", "exit 3"], timeout=30).exit_code == 3


def test_commands_over_the_open_connection_are_not_held_back_by_nagle(host_transport):
    import socket as s

    host_transport.run(["true"], check=True)
    sock = host_transport._client().get_transport().sock
    assert sock.getsockopt(s.IPPROTO_TCP, s.TCP_NODELAY) == 1
