"""An engine venv install that did not finish is made again, and a run's installer ends with the
run (issue 29): the real CLI on a container of its own, /opt/gpunode/venvs a small tmpfs.

1. the provision fails at the engine venv with the disk full (ENOSPC), and no lock manifest marks
   the venv as finished (before: uv had recorded torch as installed without all its files, and
   every re-run failed verifying it, `Unable to find torch_shm_manager`);
2. the tmpfs enlarged, `--only engine` is killed (SIGKILL: no goodbye) while uv installs: the
   run's uv ends with it (before: it went on installing beside the next run), and nothing is
   left holding the lock;
3. `--only engine` makes the venv again and converges: torch and vLLM import, the manifest is there;
4. `--only engine` once more changes nothing.
"""

from __future__ import annotations

import pytest

from tests.lab.provision_helpers import (
    container_fixture,
    cpu_inventory_fixture,
    kill,
    poll,
    provision,
    provision_ok,
    resolve_plan,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = 237  # made and removed by this module
MEMORY_MB = 6144  # the tmpfs's pages count against the container's memory
VENVS = "/opt/gpunode/venvs"
SMALL, LARGE = "400m", "5g"

box = container_fixture(VMID, MEMORY_MB, "lab-enospc")
inventory = cpu_inventory_fixture(VMID)


@pytest.fixture(scope="module")
def plan(inventory) -> dict:
    return resolve_plan(inventory, VMID)


def engine_step(plan: dict) -> str:
    return f"engine venv ({plan['pinset']})"


def installers(box, plan: dict, seconds: int = 0) -> list[str]:
    """uv processes installing into the engine venv that have run for at least `seconds`."""
    prefix = f"uv pip install --python {plan['venv']}/bin/python"
    found = []
    for line in box.sh("ps -eo pid=,etimes=,args=", check=False).out.splitlines():
        pid, elapsed, args = line.split(None, 2)
        if args.startswith(prefix) and int(elapsed) >= seconds:
            found.append(pid)
    return found


def lock_holders(box) -> list[str]:
    return box.sh("find /proc/[0-9]*/fd -maxdepth 1 -lname /var/lib/gpunode/lock 2>/dev/null | cut -d/ -f3 | sort -u",
                  check=False).out.split()


def test_1_a_full_disk_fails_the_engine_venv_install_and_marks_nothing_finished(box, inventory, plan):
    box.sh(f"mkdir -p {VENVS} && mount -t tmpfs -o size={SMALL} tmpfs {VENVS}")
    run = provision(inventory, VMID)
    assert run.rc == 2, run.explain()
    (failed,) = run.failed()
    assert failed["step"] == engine_step(plan), run.explain()
    assert "No space left on device" in failed["reason"], failed["reason"][-2000:]
    assert not box.exists(f"{plan['venv']}/gpunode-lock.json"), "an unfinished venv has a lock manifest"
    print(f"\nfull disk: failed after {run.seconds:.1f} s; {box.sh(f'df -h {VENVS} | tail -1').out.strip()}")


def test_2_killed_while_uv_installs_the_runs_uv_ends_with_it(box, inventory, plan):
    box.sh(f"mount -o remount,size={LARGE} {VENVS}")
    killed: list[list[str]] = []

    def on_event(event, proc) -> None:
        if not killed:
            killed.append(poll("uv to install the engine venv for 1 s", lambda: installers(box, plan, 1),
                               timeout=300, every=0.2))
            kill(proc)

    run = provision(inventory, VMID, "--only", "engine", on_event=on_event)
    assert killed and run.rc != 0, run.explain()
    # Its connection gone, the lock shell ends the run's commands before it lets go of the lock.
    poll(f"the killed run's uv {killed[0]} to end", lambda: not installers(box, plan), timeout=20)
    assert lock_holders(box) == []
    assert not box.exists(f"{plan['venv']}/gpunode-lock.json")


def test_3_the_rerun_makes_the_unfinished_venv_again_and_converges(box, inventory, plan):
    run = provision_ok(inventory, VMID, "--only", "engine")
    event = run.event(engine_step(plan))
    assert event["status"] == "changed", run.explain()
    assert "no lock manifest: a previous install did not finish" in event["reason"], event["reason"]
    got = box.sh(f"{plan['venv']}/bin/python -c 'import torch, vllm; print(torch.__version__, vllm.__version__)'",
                 timeout=300)
    assert box.exists(f"{plan['venv']}/gpunode-lock.json")
    print(f"\nre-run converged in {run.seconds:.1f} s; the venv imports torch and vllm {got.out.strip()}")


def test_4_a_second_rerun_changes_nothing(box, inventory, plan):
    run = provision_ok(inventory, VMID, "--only", "engine")
    assert run.status(engine_step(plan)) == "ok", run.explain()
    assert run.changed() == [], run.explain()
