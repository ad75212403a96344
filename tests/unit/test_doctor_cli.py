"""inv doctor on recorded evidence (tests/data/snapshots/lab-*/README.md say how each was recorded):
what it reads, the entries it names with the line that shows them, its exit codes and JSON document."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from invoke import Context, Exit

from gpunode.cli.doctor import doctor
from gpunode.doctor import checks
from gpunode.doctor.gather import SECTIONS, collect, evidence, parse_listeners, parse_units
from gpunode.engine.metered import Metered
from gpunode.facts import snapshot
from gpunode.transport.local import LocalTransport

SNAPS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
HEALTHY = SNAPS / "lab-cpu-fleet"
BROKEN = SNAPS / "lab-port-taken-shm-full"


def run(capsys, **kw) -> tuple[int, str, str]:
    try:
        doctor(Context(), **kw)
        code = 0
    except Exit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_units_and_listeners_of_a_recorded_fleet():
    raw = snapshot.load(HEALTHY)
    units = {u.name: u for u in parse_units(raw.ok("doctor_units") or "")}
    assert sorted(units) == ["gpunode-cpu0.service", "gpunode-cpu1.service", "gpunode-demo.service",
                             "gpunode-router.service", "gpunode-stage-weights.service"]
    cpu0 = units["gpunode-cpu0.service"]
    assert (cpu0.active, cpu0.sub, cpu0.port, cpu0.result) == ("active", "running", 30001, "success")
    assert units["gpunode-demo.service"].port is None, "${DEMO_PORT} is not a literal port"
    held = {x.port: x for x in parse_listeners(raw.ok("doctor_ports") or "")}
    assert cpu0.main_pid in held[30001].pids and held[30001].address == "127.0.0.1"
    assert "sglang::router" in held[30000].process


def test_a_healthy_fleet_has_no_finding_and_exits_0(capsys):
    code, out, _ = run(capsys, facts=str(HEALTHY))
    assert code == 0
    assert out.startswith("lab/200: no known failure applies (5 gpunode unit(s), 4") and "note" not in out


def test_port_taken_and_shm_full_are_named_with_their_evidence(capsys):
    code, out, _ = run(capsys, facts=str(BROKEN), json=True)
    assert code == 1
    doc = json.loads(out)
    assert doc["schema"] == "gpunode.doctor/1" and doc["findings"] == 3 and doc["errors"] == 0
    (target,) = doc["targets"]
    found = {f["id"]: f for f in target["findings"]}
    assert list(found) == ["shm-full", "port-in-use", "unit-failed"], "catalogue order"
    assert found["port-in-use"]["evidence"].startswith("gpunode-doctor-port.service ")
    assert found["port-in-use"]["evidence"].endswith("OSError: [Errno 98] Address already in use")
    assert found["port-in-use"]["via"] == "journal" and found["port-in-use"]["sources"]
    assert found["shm-full"]["evidence"] == "/dev/shm 0 MiB free of 64 MiB" and found["shm-full"]["via"] == "shm_full"
    assert target["units"] == [{"name": "gpunode-doctor-port.service", "load": "loaded", "active": "failed",
                                "sub": "failed", "result": "exit-code", "restarts": 0, "port": 18080}]


def test_the_port_holder_is_named_from_ss_without_the_journal():
    ev = evidence(snapshot.load(BROKEN))
    shown = checks.port_taken(ev)
    assert shown.startswith("gpunode-doctor-port.service is failed (failed); port 18080 is held by 127.0.0.1:18080 "
                            'users:(("python3",pid=')
    assert checks.port_taken(evidence(snapshot.load(HEALTHY))) == "", "running servers hold their own ports"


def test_shm_over_memory_uses_memtotal_where_no_cgroup_limit_shows():
    """A Proxmox guest reads no limit in its cgroup root (lxc/<vmid>/ns); MemTotal (lxcfs) is its limit."""
    ev = evidence(snapshot.load(HEALTHY))
    s = ev.facts.system
    full = dataclasses.replace(s, mem_limit_bytes=None, mem_total_bytes=1 << 30,
                               shm_size_bytes=1 << 30, shm_free_bytes=100 << 20)

    def shown(system) -> str:
        return checks.shm_over_memory_limit(dataclasses.replace(ev, facts=dataclasses.replace(ev.facts, system=system)))

    assert shown(full) == "/dev/shm holds 924 MiB, over 80% of the target's memory (MemTotal) 1024 MiB"
    assert shown(dataclasses.replace(full, mem_limit_bytes=512 << 20)).endswith(
        "over 80% of the container's memory limit 512 MiB")
    assert shown(dataclasses.replace(full, mem_total_bytes=4 << 30)) == ""


def test_human_report_shows_symptom_cause_fix_source_and_evidence(capsys):
    code, out, _ = run(capsys, facts=str(BROKEN))
    assert code == 1
    assert "lab/257: 3 known failure(s) apply" in out.splitlines()[0]
    block = out.split("[port-in-use]", 1)[1].split("\n  [", 1)[0]
    for head in ("seen     gpunode-doctor-port.service", "cause    another server", "fix      stop the other",
                 "gpunode  each server", "source   https://github.com/dphnAI/sonar/issues/621"):
        assert head in block, block


def test_a_journal_file_alone_is_enough(capsys, tmp_path):
    journal = tmp_path / "cpu1.log"
    journal.write_text((BROKEN / "doctor_journal.txt").read_text())
    code, out, _ = run(capsys, journal=str(journal))
    assert code == 1
    assert "[port-in-use]" in out and "[shm-full]" not in out
    assert "note: no unit states" in out, "says what it could not look at"


def test_a_facts_snapshot_of_inv_facts_says_what_it_lacks(capsys):
    code, out, _ = run(capsys, facts=str(SNAPS / "h200"))
    assert code == 0
    assert "note: no unit states" in out and "note: no journal lines" in out and "note: no listening ports" in out


@pytest.mark.parametrize("kw, words", [
    ({"journal": "/nonexistent/x.log"}, "--journal /nonexistent/x.log: no such file"),
    ({"facts": str(SNAPS)}, "is not a facts snapshot: it has no meta.json"),
    ({"facts": str(HEALTHY), "host": "lab"}, "do not go with --host"),
])
def test_bad_input_exits_2_naming_it(capsys, kw, words):
    with pytest.raises(Exit) as exc:
        doctor(Context(), **kw)
    assert exc.value.code == 2 and words in str(exc.value.message)


def test_one_round_trip_on_a_real_target():
    t = Metered(LocalTransport("here"))
    raw = collect(t)
    assert t.commands == 1
    assert {"shm", "memlimit", "doctor_devices"} <= set(raw.sections)
    assert set(SECTIONS) - set(raw.sections) <= {"doctor_units", "doctor_journal", "doctor_ports"}, \
        "only sections whose tool is missing here are left out"


def test_a_group_reports_every_target_and_an_unreachable_one_exits_2(capsys, tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    inv = tmp_path / "hosts.yml"
    inv.write_text("hosts:\n  here: {connection: local}\n"
                   f"  gone: {{address: 127.0.0.1, port: {closed}, user: root}}\n"
                   "groups:\n  both: {hosts: [here, gone]}\n")
    code, out, _ = run(capsys, group="both", inventory=str(inv), json=True)
    doc = json.loads(out)
    assert code == 2 and doc["errors"] == 1
    by = {t["target"]: t for t in doc["targets"]}
    assert list(by) == ["here", "gone"], "in the order given"
    assert by["here"]["error"] == "" and by["here"]["gathered_at"]
    assert "gone" in by["gone"]["error"] and by["gone"]["findings"] == []
