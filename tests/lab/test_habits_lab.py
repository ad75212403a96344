"""What an Ansible or pyinfra user sees from the `gpunode` console script on the lab (issue 43),
on the lab's container 200: a no-op `--check` is one line per target unless -v (after one real run of
the base role, which a fresh lab has not had); a target whose facts are refused (its model folder
missing) is reported in the recap and in --json while the other target is checked."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode_lab import paths
from tests.lab.provision_helpers import REPO, cpu_vars, write_inventory

pytestmark = pytest.mark.lab

GPUNODE = Path(sys.executable).with_name("gpunode")


def gpunode(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(GPUNODE), *argv], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_no_op_check_is_one_line_per_target_unless_verbose():
    # --only base: the base role converges container 200 (a no-op where an earlier test or run did it)
    # and nothing else of it changes, whatever other tests run there
    applied = gpunode("provision", "-i", "inventory", "--host", "lab", "--ct", str(paths.CT_CPU), "--only", "base")
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    quiet = gpunode("provision", "-i", "inventory", "--host", "lab", "--ct", str(paths.CT_CPU), "--check",
                    "--only", "base")
    assert quiet.returncode == 0, quiet.stdout[-3000:] + quiet.stderr[-3000:]
    assert re.fullmatch(r"lab/200: ok, nothing would change \(\d+ steps, 1 round trip, \d+\.\ds\)\n",
                        quiet.stdout), quiet.stdout
    loud = gpunode("provision", "-i", "inventory", "--host", "lab", "--ct", str(paths.CT_CPU), "--check",
                   "--only", "base", "-v")
    assert loud.returncode == 0 and "lab/200: plan" in loud.stdout, loud.stdout[-3000:]
    steps = int(re.search(r"\((\d+) steps", quiet.stdout).group(1))
    assert sum(1 for line in loud.stdout.splitlines() if line.lstrip().startswith("ok lab/200 base:")) == steps
    assert "recap (check mode: nothing was changed)" in loud.stdout


def test_a_target_refused_at_its_facts_does_not_stop_the_other(tmp_path):
    inventory = write_inventory(tmp_path / "hosts.yml", {
        paths.CT_CPU: {"vars": cpu_vars()},
        paths.CT_GPU: {"vars": {"model_source": "/mnt/lab/models/not-there"}}})
    run = gpunode("provision", "-i", str(inventory), "-l", "lab", "--check", "--json", "--only", "base")
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    recap = json.loads(run.stdout.splitlines()[-1])
    got = {t["target"]: (t["failed"], t["unreachable"], t["error"].split("\n")[0]) for t in recap["targets"]}
    assert got == {"lab/200": (0, False, ""),
                   "lab/201": (0, False, "lab/201: model folder /mnt/lab/models/not-there does not exist on lab/201")}
    # lab/200 was checked: its base steps counted, ok or would-change (a fresh lab has not run them)
    assert recap["check"] is True and recap["ok"] + recap["changed"] > 0
