"""A host firewall of gpunode's own: one nftables table, `inet gpunode` (issue 44, docs/fleet.md 'Firewall').

The table holds one input chain that lets only the given sources (a fleet member's: its fleet
router) reach the given TCP ports (its servers'), drops every other packet to those ports, and
leaves every other port alone (SSH, the user's own services): a packet to another port passes
through this chain as if it were not there. Loopback is always let in (the target's own status
and readiness checks, and a router on the same node, reach the servers over lo).

The ruleset lives in a file (/etc/gpunode/firewall.nft, written by a File step, so --check shows
its diff) that replaces the table whole in one nft transaction (`table`, `delete table`, the
table: nft -f applies all or nothing), and gpunode-firewall.service loads it at boot. NftTable is
the kernel's side: the table that is live must be the one that file loads. Listing formats differ
between nft versions, so the live table is not compared with the file's text: when gpunode loads
the file it records, beside it, the file's sha256 and the sha256 of `nft list table inet gpunode`
right after; a re-run changes nothing while both still hold, and reloads when the file changed or
the live table no longer lists the same (a rule added or flushed by hand, a table deleted).
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from gpunode import shell
from gpunode.errors import StepError
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step, inline

FAMILY, TABLE = "inet", "gpunode"
RULES = "/etc/gpunode/firewall.nft"
LOADED = "/etc/gpunode/firewall.loaded"  # "<sha256 of RULES> <sha256 of the live listing>", 0600
UNIT = "gpunode-firewall.service"

_PROBE = shell.script("gpunode.steps", "firewall_probe.sh")
_APPLY = shell.script("gpunode.steps", "firewall_apply.sh")
# Whether anything of the firewall is left: its files (the table is only ever loaded from them).
_LEFT = inline('if [ -e "$1" ] || [ -e "$2" ] || [ -e "$3" ]; then echo present; else echo absent; fi')
_REMOVE = shell.script("gpunode.steps", "firewall_remove.sh")


def sources(words: Sequence[str], where: str) -> tuple[list[str], list[str]]:
    """(IPv4, IPv6) networks of addresses or CIDRs; StepError naming the bad one (nft would resolve a
    host name once at load time, so the rule would silently keep an old address)."""
    v4: list[str] = []
    v6: list[str] = []
    for word in words:
        try:
            net = ipaddress.ip_network(str(word).strip("[]"), strict=False)
        except ValueError:
            raise StepError(f"{where}: {str(word)[:80]!r} is not an IP address or network",
                            hint="the firewall lets in addresses, not host names: give e.g. 10.0.0.3 or "
                            "10.0.0.0/24") from None
        text = str(net.network_address) if net.num_addresses == 1 else str(net)
        (v4 if net.version == 4 else v6).append(text)
    return sorted(set(v4)), sorted(set(v6))


def ruleset(ports: Sequence[int], allow: Sequence[str], where: str) -> str:
    """The nft script that makes table inet gpunode: only `allow` reaches `ports` over TCP."""
    v4, v6 = sources(allow, where)
    dports = "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"
    rules = ['iif "lo" accept']
    if v4:
        rules.append(f"tcp dport {dports} ip saddr {{ {', '.join(v4)} }} accept")
    if v6:
        rules.append(f"tcp dport {dports} ip6 saddr {{ {', '.join(v6)} }} accept")
    rules.append(f"tcp dport {dports} drop")
    body = "".join(f"\t\t{r}\n" for r in rules)
    return (f"# managed by gpunode (gpunode/steps/firewall.py); local changes will be overwritten\n"
            f"# only {', '.join(v4 + v6)} reach TCP {dports[2:-2]}; every other port is left alone\n"
            f"table {FAMILY} {TABLE}\ndelete table {FAMILY} {TABLE}\n"
            f"table {FAMILY} {TABLE} {{\n\tchain input {{\n"
            f"\t\ttype filter hook input priority filter; policy accept;\n{body}\t}}\n}}\n")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class NftTable(Step):
    """The live table inet gpunode is the one `path` loads (content: what the File step writes there).

    + path: the nft script, already written by the step before this one
    + content: its desired text (its sha256 is compared with what was last loaded)
    """

    changes_facts: ClassVar[bool] = False

    content: str = ""
    path: str = RULES
    loaded: str = LOADED

    @property
    def id(self) -> str:
        return f"nftables:{FAMILY} {TABLE}"

    def probe(self) -> list[str]:
        return shell.sh(_PROBE, FAMILY, TABLE, self.loaded)

    def check(self, probe: Probe) -> Outcome:
        said = dict(line.split(" ", 1) for line in probe.lines() if " " in line)
        what = f"table {FAMILY} {TABLE} from {self.path}"
        if said.get("nft") != "yes":
            return Change(f"load {what} once nftables is installed (no nft command yet)")
        live = said.get("live", "")
        if live == "none":
            return Change(f"load {what} (no such table is live)")
        src, _, listed = said.get("loaded", "").partition(" ")
        if src != digest(self.content):
            return Change(f"load {what} (its rules changed since gpunode last loaded it)" if src
                          else f"load {what} (gpunode has not loaded it here yet)")
        if listed != live:
            return Change(f"load {what} again: the live table differs from what gpunode loaded (changed by hand?)")
        return NoChange(f"the live {FAMILY} {TABLE} table is the one {self.path} loads")

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_APPLY, FAMILY, TABLE, self.path, self.loaded)),
                        f"loading {self.path} into nftables", reads_as=f"nft -f {self.path}",
                        failure=f"nft could not load {self.path}",
                        hint=f"nft -c -f {self.path} on the target says why; does the kernel have nf_tables?")]


@dataclass
class NoFirewall(Step):
    """No gpunode firewall on the target: its unit stopped and gone, the table deleted, its files removed."""

    changes_facts: ClassVar[bool] = False

    paths: list[str] = field(default_factory=lambda: [RULES, LOADED, f"/etc/systemd/system/{UNIT}"])

    @property
    def id(self) -> str:
        return f"no-nftables:{FAMILY} {TABLE}"

    def probe(self) -> list[str]:
        return shell.sh(_LEFT, *self.paths)

    def check(self, probe: Probe) -> Outcome:
        if probe.output.strip() == "absent":
            return NoChange(f"there is no gpunode firewall here ({self.paths[0]} does not exist)")
        return Change(f"remove the gpunode firewall: stop {UNIT}, delete table {FAMILY} {TABLE}, remove its files")

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_REMOVE, UNIT, FAMILY, TABLE, *self.paths)), "removing the gpunode firewall",
                        reads_as=f"systemctl disable --now {UNIT}; nft delete table {FAMILY} {TABLE}; "
                        f"rm -f {' '.join(self.paths)}; systemctl daemon-reload",
                        failure="the gpunode firewall was not removed")]
