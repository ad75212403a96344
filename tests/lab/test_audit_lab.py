"""inv audit --host lab: `pct config N` read through the lab's real sshd and pct stand-in.

The module makes its own stopped container with two GPUs' devN entries and the lab's three
read-only shares (what `pct config` prints comes from the lab's PVE-format file of it), audits
it, and removes it. The lab's containers are privileged (no `unprivileged: 1` in their
configs), which the audit must say; the rest of the config is clean."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpunode_lab import containers, paths
from tests.lab.provision_helpers import INV, REPO, write_inventory

pytestmark = pytest.mark.lab

VMID = 266  # made and removed by this module
MISSING = 267  # never created


@pytest.fixture(scope="module")
def box(lab):
    ct = containers.Container(VMID, "cpu", "lab-audit", 2048, False, 1, 2, containers.SHARES)
    containers.remove(ct)
    containers.ensure(ct)
    yield ct
    containers.remove(ct)


def audit(inventory: Path, *args: str) -> tuple[int, str, str]:
    proc = subprocess.run([str(INV), "audit", "-i", str(inventory), "--host", "lab", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def test_pct_config_over_ssh_is_audited(box, tmp_path):
    model = f"{paths.CT_MODELS}/tiny-model"
    inv = write_inventory(tmp_path / "hosts.yml", {VMID: {"vars": {"model_source": model}}})
    rc, out, err = audit(inv, "--ct", str(VMID), "--json", "--model-size-gib", "1")
    doc = json.loads(out)
    (conf,) = doc["configs"]
    assert rc == 1 and conf["source"] == f"lab/{VMID}" and conf["memory_mib"] == 2048
    assert conf["nvidia_nodes"] == ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1",
                                    "/dev/nvidiactl"]
    # Privileged, as the lab's containers are; 1 GiB of weights + one 2.5 GiB server > 2048 MiB.
    memory_line = box.pve_conf.read_text().split("\n").index("memory: 2048") + 1
    assert {(f["id"], f["line"]) for f in conf["findings"]} == {("privileged", None),
                                                                ("memory-too-small", memory_line)}


def test_a_model_source_outside_the_mounts_is_named(box, tmp_path):
    inv = write_inventory(tmp_path / "hosts.yml", {VMID: {"vars": {"model_source": "/srv/elsewhere/m"}}})
    rc, out, _ = audit(inv, "--ct", str(VMID), "--json")
    ids = {f["id"] for f in json.loads(out)["configs"][0]["findings"]}
    assert rc == 1 and ids == {"privileged", "no-model-mount"}


def test_a_container_that_does_not_exist_is_exit_2_with_pct_s_message(box, tmp_path):
    inv = write_inventory(tmp_path / "hosts.yml", {VMID: {}})
    rc, out, err = audit(inv, "--ct", str(MISSING))
    assert rc == 2 and out == "" and f"pct config {MISSING} failed" in err and str(MISSING) in err
