"""One round trip to a target for everything `inv status` shows.

A single shell script on the target: the unit files gpunode installed, ONE `systemctl show`
of all of them, each server's and the router's port (read from their ExecStart) with curl
(health or readiness, /v1/models, /metrics twice `sample` seconds apart, the router's
/workers; a fleet router's too, with its map of workers to targets), the tail of each unit's
journal filtered to failure lines, nvidia-smi where present and the clock. Its output is
sections; gpunode.fleet.status parses them here.
"""

from __future__ import annotations

from gpunode import shell
from gpunode.fleet.units import PROPERTIES
from gpunode.transport.base import Transport

ROUTER_UNIT = "gpunode-router.service"
FLEET_UNIT = "gpunode-fleet-router.service"  # fleet/endpoint.py
FLEET_MAP = "/etc/gpunode/fleet-router.workers"  # url target server, one worker a line

# gather.sh: its arguments and sections are described there.
SCRIPT = shell.script("gpunode.fleet", "gather.sh")


def sections(text: str) -> list[tuple[str, list[str], list[str]]]:
    """The script's output -> [(name, [header words after the name], body lines)], in order."""
    out: list[tuple[str, list[str], list[str]]] = []
    for line in text.splitlines():
        if line.startswith("@@section "):
            words = line.split()[1:]
            out.append((words[0], words[1:], []))
        elif out:
            out[-1][2].append(line)
    return out


def gather(target: Transport, auth: str = "", sample: float = 1.0, fleet_auth: str = "") -> str:
    """Run the script on the target; its whole output (parse with status.parse). auth and fleet_auth:
    the curl config lines (secretfiles.curl_auth) for its servers and router, and for its fleet router."""
    seconds = f"{sample:g}"
    lines = auth.rstrip("\n") + "\n" + fleet_auth.rstrip("\n") + "\n"
    result = target.run(shell.sh(SCRIPT, seconds, ",".join(PROPERTIES), ROUTER_UNIT, FLEET_UNIT, FLEET_MAP),
                        stdin=lines.encode(), timeout=120 + sample)
    result.check("gathering the status (systemctl, curl, journalctl)")
    return result.stdout
