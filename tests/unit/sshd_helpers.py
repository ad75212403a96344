"""Real OpenSSH servers for tests: each its own host key, config and port on a loopback address.

`/usr/sbin/sshd -D -e` runs in the foreground and logs to stderr; the server is ready when
it logs "Server listening", which is read from the pipe (no polling). The log stays readable
for assertions (who connected).
"""

from __future__ import annotations

import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def keygen(path: Path, kind: str = "ed25519") -> tuple[str, str]:
    """A new key pair at path; returns (type, base64) of its public half."""
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", path.name, "-f", str(path)], check=True)
    kind_name, blob = path.with_suffix(".pub").read_text().split()[:2]
    return kind_name, blob


def client_login(folder: Path) -> tuple[Path, Path]:
    """A client key pair in folder and an authorized_keys that lets it in: (key, authorized_keys)."""
    client = folder / "client_key"
    kind, blob = keygen(client)
    authorized = folder / "authorized_keys"
    authorized.write_text(f"{kind} {blob}\n")
    return client, authorized


def fingerprint_of(pub: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], check=True,
                         capture_output=True, text=True).stdout
    return out.split()[1]


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    address: str
    port: int
    host_key: Path
    proc: subprocess.Popen
    log: list[str] = field(default_factory=list)

    @property
    def pub(self) -> tuple[str, str]:
        kind, blob = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return kind, blob

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.host_key.with_suffix(".pub"))

    @property
    def known_name(self) -> str:
        return f"[{self.address}]:{self.port}"

    def known_line(self) -> str:
        kind, blob = self.pub
        return f"{self.known_name} {kind} {blob}\n"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def start_sshd(folder: Path, address: str, authorized: Path, forwarding: bool = False,
               users: tuple[str, ...] = ("root",)) -> Sshd:
    """An sshd for root (or `users`), by key only, on address:<free port>; stop() ends it."""
    folder.mkdir(parents=True, exist_ok=True)
    host_key = folder / "host_key"
    keygen(host_key)
    port = free_port(address)
    config = folder / "sshd_config"
    config.write_text(f"""\
Port {port}
ListenAddress {address}
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized}
StrictModes no
AllowUsers {' '.join(users)}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PrintMotd no
UseDNS no
AllowTcpForwarding {'yes' if forwarding else 'no'}
LogLevel VERBOSE
""")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    server = Sshd(address, port, host_key, proc)
    for line in proc.stderr:
        server.log.append(line)
        if "Server listening" in line:
            break
    else:
        raise RuntimeError(f"sshd on {address}:{port} did not start:\n{''.join(server.log)}")

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            server.log.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return server
