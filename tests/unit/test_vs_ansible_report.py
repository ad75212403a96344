"""bench/vs_ansible_report.py: the pct call log, ansible-playbook's recap, the table and goals."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "vs-ansible"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("vs_ansible_report", ROOT / "bench" / "vs_ansible_report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["vs_ansible_report"] = module
    spec.loader.exec_module(module)
    return module


def test_recorded_pct_log_is_40_calls_over_one_login(report):
    calls = report.parse_pct_log((DATA / "pct-tuned-no-op-head.log").read_text())
    assert (calls.pct, calls.logins, calls.by_verb) == (40, 1, {"exec": 40})


def test_each_ssh_connection_is_one_login_and_local_calls_are_none(report):
    text = ("127.0.0.1 1000 127.0.0.1 2222\texec 296\n"
            "127.0.0.1 1001 127.0.0.1 2222\texec 296\n"
            "127.0.0.1 1000 127.0.0.1 2222\tpush 296\n"
            "none\tstatus 296\n\n")
    calls = report.parse_pct_log(text)
    assert (calls.pct, calls.logins) == (4, 2)
    assert calls.by_verb == {"exec": 2, "push": 1, "status": 1}


def test_recorded_recap_of_the_tuned_no_op_run(report):
    recap = report.parse_recap((DATA / "ansible-tuned-no-op.log").read_text())
    assert recap == {"ok": 13, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 2, "rescued": 0, "ignored": 0}


def test_no_recap_when_the_playbook_never_got_there(report):
    assert report.parse_recap("ERROR! the playbook: site.yml could not be found\n") == {}


def run(report, side, phase, seconds, pct):
    return report.Run(side, phase, seconds, report.Calls(pct, 1), 0, True)


def test_table_ratios_are_against_tuned_ansible_of_the_same_phase(report):
    runs = [run(report, "gpunode", "cold", 20.0, 100), run(report, "gpunode", "no-op", 1.0, 1),
            run(report, "Ansible tuned", "cold", 160.0, 400), run(report, "Ansible tuned", "no-op", 80.0, 300)]
    rows = report.table(runs).splitlines()[2:]
    assert rows[0].split()[-2:] == ["0.125x", "0.250x"]
    assert rows[1].split()[-2:] == ["0.013x", "0.003x"]
    assert report.goals(runs) == [
        "goal cold: gpunode 0.125x of tuned Ansible (goal <= 0.2x): met",
        "goal no-op: gpunode 0.013x of tuned Ansible (goal <= 0.01x): NOT met",
    ]


def test_no_ratio_without_a_tuned_run(report):
    runs = [run(report, "gpunode", "cold", 20.0, 100)]
    assert report.table(runs).splitlines()[2].split()[-2:] == ["-", "-"]
    assert report.goals(runs) == []
