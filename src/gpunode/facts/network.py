"""What NCCL needs to know about a node of a multi-node server: the interface that holds the route
to the head node (NCCL_SOCKET_IFNAME) and the InfiniBand/RoCE ports that are up (NCCL_IB_HCA).

Only multi-node plans ask for these sections (`snippets(head)`, in the same round trip as the
other facts); a single-node probe never runs them. The InfiniBand section prints what `ibstatus`
prints, read from the same sysfs files ibstatus reads, so that a pasted `ibstatus` or `ibstat`
output parses the same way. (GN_IB_ROOT: another sysfs tree, for tests.)
"""

from __future__ import annotations

import ipaddress
import re

from gpunode import shell
from gpunode.facts.snapshot import RawFacts
from gpunode.facts.snippet import Snippet
from gpunode.facts.types import IbPort, Network

# ibstatus's own format (infiniband-diags' ibstatus script: one block per port, sysfs values as they are)
_IB = r"""
for p in "${GN_IB_ROOT:-/sys/class/infiniband}"/*/ports/*; do
  [ -d "$p" ] || continue
  d=${p%/ports/*}; d=${d##*/}; n=${p##*/}
  s=; r=; l=; read -r s <"$p/state"; read -r r <"$p/rate"; read -r l <"$p/link_layer"
  printf "Infiniband device '%s' port %s status:\n\tstate:\t\t %s\n\trate:\t\t %s\n\tlink_layer:\t %s\n\n" \
    "$d" "$n" "$s" "$r" "$l"
done 2>/dev/null
true"""


def snippets(head: str) -> tuple[Snippet, ...]:
    """The sections a multi-node node adds to its facts probe: its route to the head's address,
    its IPv4 addresses (the head's own route is local, through lo: its interface is the one that
    holds the address) and its InfiniBand ports."""
    return (Snippet("net_route", f"ip -o route get {shell.join([head])}"),
            Snippet("net_addr", "ip -o addr show"),
            Snippet("infiniband", _IB))


def parse_route(text: str) -> dict[str, str]:
    """`ip -o route get ADDR` (one line; without -o, its first line) -> its keywords: dev, src, via,
    and "local" when the address is this node's own."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    words = first.split()
    out = {"type": words[0]} if words and words[0] in ("local", "unreachable", "prohibit", "blackhole") else {}
    for key in ("dev", "src", "via"):
        if key in words[:-1]:
            out[key] = words[words.index(key) + 1]
    return out


def parse_addrs(text: str) -> dict[str, str]:
    """`ip -o addr show` -> {address: interface} (IPv4 and IPv6, prefix length cut off)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\d+:\s+(\S+)\s+inet6?\s+([0-9a-fA-F.:]+)/\d+", line)
        if m:
            out[m.group(2)] = m.group(1).split("@")[0]
    return out


_IBSTATUS = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:", re.MULTILINE)
_IBSTAT_CA = re.compile(r"^CA '([^']+)'", re.MULTILINE)


def parse_ib(text: str) -> tuple[IbPort, ...]:
    """ibstatus's output (what the probe prints) or ibstat's -> the ports, in order."""
    if _IBSTATUS.search(text):
        return tuple(_ibstatus(text))
    return tuple(_ibstat(text))


def _field(block: str, name: str) -> str:
    m = re.search(rf"^\s*{name}:\s*(.*?)\s*$", block, re.MULTILINE | re.IGNORECASE)
    return m.group(1) if m else ""


def _ibstatus(text: str) -> list[IbPort]:
    heads = list(_IBSTATUS.finditer(text))
    out = []
    for i, m in enumerate(heads):
        block = text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        state = _field(block, "state")   # "4: ACTIVE"
        out.append(IbPort(m.group(1), int(m.group(2)), state.upper().endswith("ACTIVE"),
                          _field(block, "link_layer"), _field(block, "rate")))
    return out


def _ibstat(text: str) -> list[IbPort]:
    cas = list(_IBSTAT_CA.finditer(text))
    out = []
    for i, ca in enumerate(cas):
        block = text[ca.end():cas[i + 1].start() if i + 1 < len(cas) else len(text)]
        ports = list(re.finditer(r"^\s*Port (\d+):\s*$", block, re.MULTILINE))
        for j, p in enumerate(ports):
            part = block[p.end():ports[j + 1].start() if j + 1 < len(ports) else len(block)]
            out.append(IbPort(ca.group(1), int(p.group(1)), _field(part, "State").lower() == "active",
                              _field(part, "Link layer"), _field(part, "Rate")))
    return out


def parse_network(head: str, route: str | None, addrs: str | None, ib: str | None) -> Network:
    """The node's network facts toward the head; `problem` says why the interface is unknown."""
    r = parse_route(route or "")
    ports = parse_ib(ib or "")
    if not route:
        return Network(head, ib_ports=ports, problem=f"`ip -o route get {head}` gave no answer (is iproute2 "
                                                           "installed?)")
    if r.get("type") in ("unreachable", "prohibit", "blackhole") or "dev" not in r:
        return Network(head, ib_ports=ports, problem=f"no route to {head}: {route.strip().splitlines()[0][:200]}")
    dev = r["dev"]
    if r.get("type") == "local" or dev == "lo":
        # the head itself: the interface is the one holding its address, not lo
        held = parse_addrs(addrs or "")
        dev_of = held.get(_canonical(head))
        if dev_of is None or dev_of == "lo":
            return Network(head, ib_ports=ports, problem=f"{head} is a local address, but `ip -o addr show` names "
                                                         "no interface other than lo holding it")
        return Network(head, dev_of, _canonical(head), ports)
    return Network(head, dev, r.get("src"), ports)


def _canonical(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


def from_raw(raw: RawFacts, head: str) -> Network:
    """The network facts of a probe that ran `snippets(head)`; a section's output whatever its exit code
    (`ip route get` exits non-zero with the reason there is no route)."""
    def out(name: str) -> str | None:
        s = raw.get(name)
        return s.output if s is not None else None

    return parse_network(head, out("net_route"), out("net_addr"), out("infiniband"))
