"""Two servers on `host: 0.0.0.0` (README's fleet example) in the lab's container 200 (issue 41):
the router's workers were http://0.0.0.0:PORT while readiness waited for 127.0.0.1 in the router's
/workers, so every run failed after 120 s. Now both come from one rule (gpunode/listen.py): the
run is ready, the router lists both servers on loopback as healthy, and a completion goes through
it. Container 200 is left as it was found: what this test added is torn down."""

from __future__ import annotations

import json

import pytest

from gpunode_lab import paths
from tests.lab.provision_helpers import cpu_inventory, provision_ok

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = paths.CT_CPU


def inside(ct, script: str) -> str:
    return ct.run(["sh", "-c", script], check=True).stdout


# what a provision adds to a container that had the base role only; what was there before stays
WATCHED = ("/etc/systemd/system", "/etc/gpunode", "/opt/gpunode/venvs", "/dev/shm")
LIST = 'for d; do [ -d "$d" ] && for f in "$d"/*; do [ -e "$f" ] && echo "$f"; done; done; true'
RESTORE = r"""units=""; for p; do case "$p" in /etc/systemd/system/gpunode-*) units="$units ${p##*/}";; esac; done
[ -n "$units" ] && systemctl disable --now $units
rm -rf -- "$@"; systemctl daemon-reload"""


def test_two_servers_on_every_address_are_ready_behind_the_router(ct, tmp_path):
    had = set(inside(ct, f"set -- {' '.join(WATCHED)}; {LIST}").split())
    inventory = cpu_inventory(tmp_path / "hosts.yml", VMID, host="0.0.0.0")
    try:
        provision_ok(inventory, VMID)
        workers = json.loads(inside(ct, "curl -sS --max-time 10 http://127.0.0.1:30000/workers"))
        rows = workers.get("workers", workers) if isinstance(workers, dict) else workers
        listed = {w["url"]: w.get("is_healthy") for w in rows}
        assert listed == {"http://127.0.0.1:30001": True, "http://127.0.0.1:30002": True}, workers
        body = json.dumps({"model": "tiny-qwen3", "prompt": "The capital of France is", "max_tokens": 4})
        answer = json.loads(ct.run(["curl", "-sS", "--max-time", "120", "-H", "Content-Type: application/json",
                                    "-d", body, "http://127.0.0.1:30000/v1/completions"], check=True).stdout)
        assert answer["choices"][0]["text"]
    finally:
        added = sorted(set(inside(ct, f"set -- {' '.join(WATCHED)}; {LIST}").split()) - had)
        if added:
            ct.run(["sh", "-c", RESTORE, "sh", *added], check=True, timeout=300)
