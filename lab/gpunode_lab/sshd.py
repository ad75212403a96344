"""The lab's OpenSSH server: 127.0.0.1:2222, its own host key, root login by key only.

It is a second sshd with its own config, keys and pidfile, started as a daemon (this
machine's PID 1 is not systemd). Sessions are kept lean: no PAM, no motd, no lastlog, and
bash does not read root's start-up files (see SHLVL below), so a command costs about one
channel round trip.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

from gpunode_lab import paths
from gpunode_lab.common import LabError, Progress, host_run, say, write_text

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself and needs its absolute path


def sshd_config() -> str:
    s = paths
    return f"""\
# gpunode lab sshd (written by gpunode_lab.sshd; do not edit). The host's own sshd, if any,
# is untouched: this one listens on {s.SSH_ADDRESS}:{s.SSH_PORT} only.
Port {s.SSH_PORT}
ListenAddress {s.SSH_ADDRESS}
HostKey {s.HOST_KEY}
PidFile {s.SSHD_PID}
AuthorizedKeysFile {s.AUTHORIZED_KEYS}
AllowUsers {s.SSH_USER}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
PermitUserEnvironment no
PrintMotd no
PrintLastLog no
UseDNS no
X11Forwarding no
AllowAgentForwarding no
AllowTcpForwarding no
# gpunode keeps one connection per host and opens many channels on it.
MaxSessions 64
MaxStartups 64:30:128
LogLevel INFO
Subsystem sftp internal-sftp
# bash reads ~/.bashrc for every command sshd runs when SHLVL < 2 ("run by sshd"); this
# host's root profile is a developer's (pyenv, cargo) and costs ~100 ms a command. A Proxmox
# host's root has Debian's empty default. Starting sessions at SHLVL=1 skips it.
SetEnv SHLVL=1
"""


def pid() -> int | None:
    """The pid of the lab's sshd listener, when it runs."""
    try:
        value = int(paths.SSHD_PID.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{value}/cmdline").read_bytes()
    except OSError:
        return None
    return value if b"sshd" in cmdline else None


def port_open(address: str = paths.SSH_ADDRESS, port: int = paths.SSH_PORT) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _keygen(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    host_run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
             what=f"creating {path}", hint="install openssh-client (ssh-keygen)")


def ensure_files() -> bool:
    """Keys, authorized_keys, known_hosts and sshd_config. True when the config changed."""
    paths.SSH_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.SSH_DIR, 0o700)
    _keygen(paths.HOST_KEY, "gpunode-lab host key")
    _keygen(paths.CLIENT_KEY, "gpunode-lab root login")
    pub = paths.CLIENT_KEY.with_suffix(".pub").read_text().strip()
    write_text(paths.AUTHORIZED_KEYS, pub + "\n", 0o600)
    kind, blob = paths.HOST_KEY.with_suffix(".pub").read_text().split()[:2]
    write_text(paths.KNOWN_HOSTS, f"[{paths.SSH_ADDRESS}]:{paths.SSH_PORT} {kind} {blob}\n")
    return write_text(paths.SSHD_CONFIG, sshd_config(), 0o600)


def start(progress: Progress | None = None, restart: bool = False) -> None:
    current = pid()
    if current and not restart:
        say(progress, f"sshd: running (pid {current}) on {paths.SSH_ADDRESS}:{paths.SSH_PORT}")
        return
    if current:
        stop(progress)
    if port_open():
        raise LabError(f"port {paths.SSH_PORT} on {paths.SSH_ADDRESS} is taken by another program",
                       hint=f"find it with `ss -ltnp 'sport = :{paths.SSH_PORT}'` and stop it")
    if not Path(SSHD).exists():
        raise LabError("OpenSSH's server is not installed", hint="apt-get install openssh-server")
    # Privilege separation needs /run/sshd, which systemd would create on a normal host.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    host_run([SSHD, "-t", "-f", str(paths.SSHD_CONFIG)], what="checking the lab's sshd_config")
    paths.SSHD_PID.unlink(missing_ok=True)
    host_run([SSHD, "-f", str(paths.SSHD_CONFIG), "-E", str(paths.SSHD_LOG)], what="starting the lab's sshd",
             hint=f"see {paths.SSHD_LOG}")
    deadline = time.monotonic() + 10
    while not (pid() and port_open()):
        if time.monotonic() > deadline:
            log = paths.SSHD_LOG.read_text(errors="replace")[-2000:] if paths.SSHD_LOG.exists() else ""
            raise LabError("the lab's sshd did not start listening", evidence=log, hint=f"see {paths.SSHD_LOG}")
        time.sleep(0.02)
    say(progress, f"sshd: started (pid {pid()}) on {paths.SSH_ADDRESS}:{paths.SSH_PORT}")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop(progress: Progress | None = None) -> None:
    """Stop the listener and every session it started (nothing of the lab's sshd is left)."""
    listener = pid()
    if not listener:
        paths.SSHD_PID.unlink(missing_ok=True)
        return
    victims = [listener, *_descendants(listener)]
    for p in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{p}").exists() for p in victims) and time.monotonic() < deadline:
        time.sleep(0.02)
    for p in victims:
        if Path(f"/proc/{p}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    paths.SSHD_PID.unlink(missing_ok=True)
    say(progress, f"sshd: stopped (pid {listener})")
