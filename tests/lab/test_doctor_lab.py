"""inv doctor on a lab container with real causes made by the test: a server whose port another
process already holds (a real bind failure of a real systemd unit), and /dev/shm full (a 64 MiB
tmpfs filled by dd until ENOSPC). doctor must name the right entries, with the evidence line,
and name nothing once the causes are gone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.lab.provision_helpers import INV, REPO, FreshContainer, poll, write_inventory

pytestmark = pytest.mark.lab

VMID = 257  # made and removed by this module
PORT = 18080
UNIT = "gpunode-doctor-port.service"
# A server as gpunode writes them (a literal --port in ExecStart), small enough to start in a
# second: Python's own HTTP server, whose bind fails with the real Errno 98 when the port is taken.
SERVER = """import argparse, http.server
p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
a = p.parse_args()
http.server.ThreadingHTTPServer(("127.0.0.1", a.port), http.server.SimpleHTTPRequestHandler).serve_forever()
"""
UNIT_TEXT = f"""[Unit]
Description=gpunode doctor lab test server on port {PORT}
[Service]
ExecStart=/usr/bin/python3 /usr/local/bin/doctor-server.py --port {PORT}
Restart=no
"""


@pytest.fixture(scope="module")
def box(lab):
    b = FreshContainer(VMID, 1024, "lab-doctor").start()
    yield b
    b.close()


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    return write_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", {VMID: {}})


def doctor(inventory: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([str(INV), "doctor", "-i", str(inventory), "--host", "lab", "--ct", str(VMID), "--json",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def findings(doc: dict) -> dict[str, dict]:
    (target,) = doc["targets"]
    assert target["error"] == "", target["error"]
    return {f["id"]: f for f in target["findings"]}


def test_a_clean_container_has_no_finding(box, inventory):
    rc, doc = doctor(inventory)
    assert (rc, findings(doc)) == (0, {})


def test_a_port_taken_before_the_server_starts_is_named(box, inventory, tmp_path):
    box.sh("cat > /usr/local/bin/doctor-server.py", input=SERVER)
    box.sh(f"cat > /etc/systemd/system/{UNIT} && systemctl daemon-reload", input=UNIT_TEXT)
    box.sh(f"systemd-run --unit=other-listener /usr/bin/python3 -m http.server {PORT} --bind 127.0.0.1")
    try:
        poll(f"the other listener on {PORT}", lambda: "LISTEN" in box.sh(f"ss -ltnH 'sport = :{PORT}'").out, 30)
        box.sh(f"systemctl start {UNIT}")
        poll(f"{UNIT} to fail", lambda: box.sh(f"systemctl is-failed {UNIT}", check=False).out.strip() == "failed",
             30)
        rc, doc = doctor(inventory, "--save", str(tmp_path / "snap"))
        found = findings(doc)
        assert rc == 1
        assert {"port-in-use", "unit-failed"} <= set(found), list(found)
        line = found["port-in-use"]["evidence"]
        assert line.startswith(f"{UNIT} ") and line.endswith("OSError: [Errno 98] Address already in use"), line
        assert found["unit-failed"]["evidence"].startswith(f"{UNIT} loaded failed failed")
        # The same answer from what was saved, and the holder named from ss alone.
        from gpunode.doctor.checks import port_taken
        from gpunode.doctor.gather import evidence
        from gpunode.facts import snapshot

        held = port_taken(evidence(snapshot.load(tmp_path / "snap")))
        assert f"port {PORT} is held by 127.0.0.1:{PORT}" in held and '"python3"' in held, held
    finally:
        box.sh(f"systemctl stop other-listener.service; systemctl reset-failed {UNIT} other-listener.service; "
               f"rm -f /etc/systemd/system/{UNIT} /usr/local/bin/doctor-server.py; systemctl daemon-reload; true")
    rc, doc = doctor(inventory)
    assert (rc, findings(doc)) == (0, {}), "nothing left once the unit and the listener are gone"


def test_a_full_dev_shm_is_named(box, inventory):
    box.sh("mount -o remount,size=64m /dev/shm")
    box.sh("dd if=/dev/zero of=/dev/shm/fill bs=1M 2>/dev/null; true")
    try:
        rc, doc = doctor(inventory)
        found = findings(doc)
        assert rc == 1 and list(found) == ["shm-full"], list(found)
        assert found["shm-full"]["evidence"] == "/dev/shm 0 MiB free of 64 MiB"
        assert found["shm-full"]["via"] == "shm_full"
    finally:
        box.sh("rm -f /dev/shm/fill")
    rc, doc = doctor(inventory)
    assert (rc, findings(doc)) == (0, {})
