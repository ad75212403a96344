"""known_hosts with everything OpenSSH allows in it, against a real sshd: markers don't break
connecting, a revoked key is refused, and `hostkeys.trust` edits only the host's lines."""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import sys

import paramiko
import pytest

from gpunode.errors import HostKeyError
from gpunode.transport import SshSettings, SshTransport
from tests.unit.sshd_helpers import client_login, keygen, start_sshd

GPUNODE = [sys.executable, "-c", "from gpunode.cli.main import main; main()"]


def sk_public_key(tmp_path) -> str:
    """An sk-ssh-ed25519@openssh.com public key (a FIDO token's), as PROTOCOL.u2f lays it out.

    No token here, so the blob is built from a real ed25519 key's 32 bytes; `ssh-keygen -l`
    reading it proves OpenSSH takes it as a security key. paramiko cannot check this type.
    """
    _, blob = keygen(tmp_path / "for_sk")
    raw = base64.b64decode(blob)
    point = raw[-32:]

    def string(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    sk = string(b"sk-ssh-ed25519@openssh.com") + string(point) + string(b"ssh:")
    line = f"sk-ssh-ed25519@openssh.com {base64.b64encode(sk).decode()}"
    (tmp_path / "sk.pub").write_text(line + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "sk.pub")], capture_output=True, text=True)
    assert out.returncode == 0 and "ED25519-SK" in out.stdout, out.stderr
    return line


@pytest.fixture
def server(tmp_path, monkeypatch):
    client, authorized = client_login(tmp_path)
    sshd = start_sshd(tmp_path / "sshd", "127.0.0.3", authorized)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ssh/config of the machine's user
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield sshd, client
    sshd.stop()


def messy_known_hosts(tmp_path, sshd) -> tuple[str, dict[str, str]]:
    """A known_hosts as a long-lived workstation has one; returns it and its pieces."""
    _, old_ed = keygen(tmp_path / "old_ed25519")
    _, old_ec = keygen(tmp_path / "old_ecdsa", "ecdsa")
    _, ca = keygen(tmp_path / "ca")
    _, gone = keygen(tmp_path / "gone")
    _, other = keygen(tmp_path / "other")
    hashed = paramiko.HostKeys.hash_host(sshd.known_name)
    p = {
        "comment": "# hosts of the lab; keep this comment\n",
        "other": f"build.example.org ssh-ed25519 {other} ops@laptop\n",
        "alias": f"{sshd.known_name},gpu1.example.org ssh-ed25519 {old_ed} old key\n",
        "blank": "\n",
        "hashed": f"{hashed} ecdsa-sha2-nistp256 {old_ec}\n",
        "ca": f"@cert-authority *.example.org ssh-ed25519 {ca} our CA\n",
        "revoked": f"@revoked * ssh-ed25519 {gone} stolen laptop\n",
        "sk": f"token.example.org {sk_public_key(tmp_path)} yubikey\n",
        "tab": f"tabbed.example.org\tssh-ed25519\t{other}\n",
    }
    return "".join(p.values()), p


def settings(sshd, client, known) -> SshSettings:
    return SshSettings(name="gpu1", address=sshd.address, port=sshd.port, key_file=str(client),
                       known_hosts=(str(known),), connect_timeout=5)


def inventory(tmp_path, sshd, client, known):
    inv = tmp_path / "hosts.yml"
    inv.write_text(f"hosts:\n  gpu1:\n    address: {sshd.address}\n    port: {sshd.port}\n"
                   f"    key: {client}\n    known_hosts: [{known}]\n")
    return inv


def test_paramiko_alone_fails_on_marker_lines(tmp_path, server):
    """Why gpunode reads the file itself: paramiko 5 raises on an @revoked line."""
    sshd, _ = server
    text, _ = messy_known_hosts(tmp_path, sshd)
    (tmp_path / "kh").write_text(text)
    with pytest.raises(paramiko.hostkeys.InvalidHostKey):
        paramiko.HostKeys(str(tmp_path / "kh"))


def test_marker_lines_do_not_break_connecting(tmp_path, server):
    sshd, client = server
    text, p = messy_known_hosts(tmp_path, sshd)
    known = tmp_path / "known_hosts"
    # The alias line holds an OLD ed25519 key for the host: refused as changed, not a traceback.
    known.write_text(text + sshd.known_line())
    with pytest.raises(HostKeyError, match="CHANGED"):
        SshTransport(settings(sshd, client, known)).run(["true"])
    # Without the stale lines, the markers, sk and tabbed lines around the key are no obstacle.
    known.write_text(text.replace(p["alias"], "").replace(p["hashed"], "") + sshd.known_line())
    t = SshTransport(settings(sshd, client, known))
    assert t.run(["echo", "ok"], check=True).stdout == "ok\n"
    t.close()


def test_revoked_host_key_is_refused_even_if_listed_as_known(tmp_path, server):
    sshd, client = server
    kind, blob = sshd.pub
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_line() + f"@revoked * {kind} {blob}\n")
    with pytest.raises(HostKeyError, match="REVOKED") as err:
        SshTransport(settings(sshd, client, known)).run(["true"])
    assert sshd.fingerprint in str(err.value)
    assert not any("Accepted publickey" in line for line in sshd.log)
    # Trusting it again is refused as well, and the file is left as it was.
    before = known.read_bytes()
    proc = subprocess.run([*GPUNODE, "hostkeys.trust", "--host", "gpu1", "-i",
                           str(inventory(tmp_path, sshd, client, known))], capture_output=True, text=True)
    assert proc.returncode == 2 and "REVOKED" in proc.stderr and "Traceback" not in proc.stderr
    assert known.read_bytes() == before


def test_trust_edits_only_the_hosts_lines_and_keeps_the_rest_byte_for_byte(tmp_path, server):
    sshd, client = server
    text, p = messy_known_hosts(tmp_path, sshd)
    real = tmp_path / "dotfiles" / "known_hosts"
    real.parent.mkdir()
    real.write_text(text)
    os.chmod(real, 0o640)
    known = tmp_path / "known_hosts"
    known.symlink_to(real)

    proc = subprocess.run([*GPUNODE, "hostkeys.trust", "--host", "gpu1", "-i",
                           str(inventory(tmp_path, sshd, client, known))], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sshd.fingerprint in proc.stdout
    # It says what it changed, by line.
    assert f"line 3: took {sshd.known_name} out of" in proc.stdout
    assert "line 5: removed ecdsa-sha2-nistp256 key" in proc.stdout

    after = real.read_text()
    kept = [p["comment"], p["other"], f"gpu1.example.org ssh-ed25519 {p['alias'].split()[2]} old key\n",
            p["blank"], p["ca"], p["revoked"], p["sk"], p["tab"]]
    assert after.startswith("".join(kept))
    new = after[len("".join(kept)):]
    kind, blob = sshd.pub
    name, got_kind, got_blob = new.split()
    assert (got_kind, got_blob) == (kind, blob)
    assert name.startswith("|1|")  # the host was hashed before, so it stays hashed
    assert known.is_symlink() and os.readlink(known) == str(real)
    assert real.stat().st_mode & 0o777 == 0o640
    assert [f for f in os.listdir(real.parent) if f.endswith(".tmp")] == []

    t = SshTransport(settings(sshd, client, known))
    assert t.run(["echo", "ok"], check=True).stdout == "ok\n"
    t.close()
