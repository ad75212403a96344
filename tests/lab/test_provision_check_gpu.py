"""`inv provision --check` on the gpu profile (nvidia-smi replays eight RTX PRO 6000, no real
GPU): the whole plan and every unit's diff, nothing changed, and units that systemd accepts.

The container is a fresh copy of the lab's 201 (same LXC and PVE config, same nvidia-smi
share and stand-in, same inventory entry) under a vmid of this module: 201 itself is shared
with whoever works on the gpu profile, and a run holding its lock, or units someone installed
there, would make "changes nothing" and "every unit is new" depend on who ran first.

The plan the check must show comes from `inv resolve --json` (the resolver's own schema,
docs/resolve.md), so nothing here hard-codes which pin set the knowledge base picks today.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.steps.unitfmt import exec_line
from gpunode_lab import containers, paths
from gpunode_lab.node import _install_nvidia_smi
from tests.lab.provision_helpers import (
    INV,
    REPO,
    FreshContainer,
    lab_host,
    provision,
    resolve_plan,
    snapshot,
    write_inventory,
)

pytestmark = pytest.mark.lab

VMID = 223  # a copy of 201, made and removed by this module
UNIT_DIR = "/etc/systemd/system"

# What `systemd-analyze verify` may say about these units in the lab: what they run and read
# is installed by the roles a check run does not apply.
EXPECTED_ABSENT = ("is not executable", "No such file or directory", "has fatal error")


@pytest.fixture(scope="module")
def gpu(lab):
    like = next(c for c in containers.lab_containers() if c.vmid == paths.CT_GPU)
    box = FreshContainer(VMID, like.memory_mb, "lab-check-gpu")
    box.ct = replace(like, vmid=VMID, hostname="lab-check-gpu")
    box.start()
    _install_nvidia_smi(box.ct)
    yield box
    box.close()


@pytest.fixture(scope="module")
def inventory(gpu, tmp_path_factory) -> Path:
    return write_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml",
                           {VMID: lab_host()["containers"][paths.CT_GPU]})


@pytest.fixture(scope="module")
def plan(inventory) -> dict:
    return resolve_plan(inventory, VMID)


def check_text(inventory: Path) -> subprocess.CompletedProcess:
    """The human --check -v output (the plan and every step, issue 43), no line of the plan wrapped."""
    return subprocess.run([str(INV), "provision", "-i", str(inventory), "--host", "lab", "--ct", str(VMID), "--check",
                           "-v"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "COLUMNS": "400"})


def created(diff: str) -> str:
    """The content of a file that a diff creates from nothing."""
    header, _, body = diff.partition("@@\n")
    assert header.splitlines()[-1].startswith("@@ -0,0 "), f"not a new file:\n{diff[:500]}"
    lines = [line for line in body.splitlines(keepends=True) if not line.startswith("\\ ")]
    assert all(line.startswith("+") for line in lines), diff[:500]
    return "".join(line[1:] for line in lines)


def test_check_shows_the_whole_plan_and_every_units_diff_and_changes_nothing(gpu, inventory, plan):
    assert plan["topology"]["servers"] == 8 and len(plan["servers"]) == 8
    before = snapshot(gpu.sh)
    proc = check_text(inventory)
    after = snapshot(gpu.sh)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert after == before, f"--check changed container {VMID}"

    assert f"Plan for lab/{VMID}: {plan['engine']} {plan['engine_version']} (pin set {plan['pinset']}" in out
    for package in plan["packages"]:
        assert package["requirement"] in out, f"pin {package['requirement']} not shown"
    assert plan["indexes"]["index_url"] in out
    for url in plan["indexes"]["extra_index_urls"]:
        assert url in out
    assert plan["fixes"], "the gpu profile's plan has no fixes: the test would prove nothing about them"
    for fix in plan["fixes"]:
        assert f"  - {fix['id']} ({fix['phase']})" in out, f"fix {fix['id']} not shown"
    for server in plan["servers"]:
        unit = f"{UNIT_DIR}/gpunode-{server['name']}.service"
        assert f"+++ {unit} (desired)" in out, f"no diff for {unit}"
        assert "+ExecStart=" + exec_line(server["argv"]) in out
        assert f'+CUDA_VISIBLE_DEVICES="{server["cuda_visible_devices"]}"' in out
    assert "+ExecStart=" + exec_line(plan["router"]["argv"]) in out
    assert f"handler restart:gpunode-{plan['servers'][-1]['name']}.service  would run" in out
    assert "recap (check mode: nothing was changed)" in out


def test_the_units_check_shows_are_valid_for_systemd_analyze_verify(gpu, inventory, plan):
    run = provision(inventory, VMID, "--check")
    assert run.rc == 0 and run.recap["check"] is True, run.explain()
    units = {e["step"].rsplit("/", 1)[1]: created(e["diff"]) for e in run.of("step")
             if e["step"].startswith(f"file:{UNIT_DIR}/")}
    assert set(units) == {f"gpunode-{s['name']}.service" for s in plan["servers"]} | {
        "gpunode-router.service", "gpunode-stage-weights.service"}

    scratch = gpu.sh("mktemp -d /tmp/gpunode-verify.XXXXXX").out.strip()
    try:
        for name, text in units.items():
            gpu.sh('cat > "$1/$2"', scratch, name, input=text)
        gpu.sh('cp "$1/gpunode-gpu0.service" "$1/broken.service"; echo "this is no setting" >> "$1/broken.service"',
               scratch)
        result = gpu.sh('cd "$1" && systemd-analyze verify ./*.service 2>&1', scratch, check=False)
    finally:
        gpu.sh('rm -rf -- "$1"', scratch)
    lines = [line for line in result.out.splitlines() if line.strip()]
    # The control: a unit with a broken line is reported, so verify really read these files.
    assert any("broken.service" in line and "Missing '='" in line for line in lines), result.out
    complaints = [line for line in lines if "broken.service" not in line
                  and not any(word in line for word in EXPECTED_ABSENT)]
    assert complaints == [], "systemd-analyze verify found problems in the rendered units:\n" + result.out
    print(f"\nsystemd-analyze verify on {len(units)} units (exit {result.rc}):\n{result.out}")
