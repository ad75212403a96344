"""A lab container as a plain SSH host: gpunode logs in to it directly (an inventory host without
`containers:`), over the lab's bridge, as rented GPU hosts are reached.

What a rented host has and the lab's base lacks: its own sshd (the base's openssh-server, whose
unit the base masks), its own host keys (the base's are shared by every container), root's
authorized key, and a non-root user (`ubuntu`) with a password and sudo (from the lab
repository). Which sudo rule the user has is set apart (`sudo_rule`), so a test can switch
between NOPASSWD and a password.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode_lab.common import LabError
from gpunode_lab.containers import Container, attach

USER = "ubuntu"
SUDOERS = f"/etc/sudoers.d/gpunode-lab-{USER}"

# $1 user, $2 the public key let in as root and as the user; stdin: "user:password" for chpasswd.
_MAKE = r"""set -eu
user=$1 key=$2
chpasswd_line=$(cat)
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null
apt-get -q install -y sudo >/dev/null
rm -f /etc/ssh/ssh_host_*
ssh-keygen -q -A >/dev/null
printf '%s\n' 'PermitRootLogin prohibit-password' 'PasswordAuthentication no' \
  'KbdInteractiveAuthentication no' >/etc/ssh/sshd_config.d/gpunode-lab.conf
id -u "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
printf '%s\n' "$chpasswd_line" | chpasswd
for home in /root "/home/$user"; do
  install -d -m 700 "$home/.ssh"
  printf '%s\n' "$key" >"$home/.ssh/authorized_keys"
  chmod 600 "$home/.ssh/authorized_keys"
done
chown -R "$user:$user" "/home/$user/.ssh"
rm -f /etc/systemd/system/ssh.service
systemctl daemon-reload
systemctl start ssh.service
cat /etc/ssh/ssh_host_ed25519_key.pub
"""

# $1 the sudoers line, or "" for none; checked by visudo before sudo reads it.
_RULE = r"""set -eu
rule=$1 dest=$2
if [ -z "$rule" ]; then rm -f "$dest"; exit 0; fi
tmp=$(dirname "$dest")/.gpunode-lab.new
printf '%s\n' "$rule" >"$tmp"
chmod 440 "$tmp"
visudo -cqf "$tmp"
mv "$tmp" "$dest"
"""


@dataclass(frozen=True)
class SshHost:
    ct: Container
    host_key: str  # "ssh-ed25519 AAAA...": the sshd's own, made by make()

    @property
    def address(self) -> str:
        return self.ct.address

    def known_hosts_line(self) -> str:
        return f"{self.address} {self.host_key}\n"


def make(ct: Container, public_key: str, password: str) -> SshHost:
    """Turn the running container `ct` (one with an address on the lab bridge) into a plain SSH
    host: sshd on port 22, root and USER let in with `public_key`, USER's password `password`
    (given on stdin, never on a command line), sudo installed with no rule for USER yet."""
    if not ct.address:
        raise LabError(f"container {ct.vmid} has no address on the lab bridge: nothing could reach its sshd",
                       hint="make it with an address (containers.lab_address)")
    out = attach(ct, ["sh", "-c", _MAKE, "sh", USER, public_key.strip()], input=f"{USER}:{password}\n".encode(),
                 what=f"making container {ct.vmid} a plain SSH host")
    kind, blob = out.decode().split()[:2]
    return SshHost(ct, f"{kind} {blob}")


def sudo_rule(ct: Container, rule: str) -> None:
    """USER's sudo rule: "NOPASSWD: ALL", "ALL" (asks USER's password), or "" (none: sudo refuses)."""
    line = f"{USER} ALL=(ALL) {rule}" if rule else ""
    attach(ct, ["sh", "-c", _RULE, "sh", line, SUDOERS], what=f"setting {USER}'s sudo rule in container {ct.vmid}")
