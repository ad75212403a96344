"""One provisioned fleet for the lab tests that only read or operate what `inv provision` made.

The progress, Prometheus and fleet-command tests (test_fleet_1_progress_lab.py,
test_fleet_2_prometheus_lab.py, test_fleet_3_commands_lab.py, run in that order: pytest collects a
folder's files by name) each provisioned a fresh container of their own, the same cpu profile, two
vLLM-CPU servers and the router: three provisions of about three minutes each on the 2-core lab
machine for one fleet's worth of checks. Here one fresh container is provisioned once, for the
session, by one run that carries what each of them asked of its own: `-vv` (the target's lines
streamed, for the progress tests) and gpunode.yaml's `prometheus_targets` (the file provision
writes, for the Prometheus test). The progress tests read that run's events; Prometheus scrapes the
fleet; the fleet commands stop, start and restart its servers and tear it down last (the only
test that changes it for good). The container is removed at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.lab.provision_helpers import CliRun, FreshContainer, cpu_inventory, fresh_container, provision_ok

VMID = 258  # made and removed by the fixture
MEMORY_MB = 8192  # two vLLM-CPU slots (~2 GB each), the router, the staged tiny model
TARGET = f"lab/{VMID}"


@dataclass
class Fleet:
    box: FreshContainer
    inventory: Path
    run: CliRun                 # the provision run (`inv provision --json -vv`)
    targets_written: Path       # the file_sd file that run wrote (gpunode.yaml's prometheus_targets)


@pytest.fixture(scope="session")
def fleet(lab, tmp_path_factory) -> Iterator[Fleet]:
    with fresh_container(VMID, MEMORY_MB, "lab-fleet") as box:
        inventory = cpu_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", VMID)
        config = tmp_path_factory.mktemp("config") / "gpunode.yaml"
        config.write_text("prometheus_targets: provisioned.json\n")
        with pytest.MonkeyPatch.context() as env:
            env.setenv("GPUNODE_CONFIG", str(config))
            run = provision_ok(inventory, VMID, "-vv")
        yield Fleet(box, inventory, run, config.parent / "provisioned.json")
