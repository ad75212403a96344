"""inv facts: replaying a recorded snapshot, as JSON and as the human report."""

from __future__ import annotations

import json
from pathlib import Path

from invoke import Context

from gpunode.cli.facts import facts as facts_task
from gpunode.cli.facts import render_facts
from gpunode.facts.parse import parse
from gpunode.facts.snapshot import load

SNAPS = Path(__file__).resolve().parents[1] / "data" / "snapshots"


def test_json_of_a_replayed_snapshot(capsys, tmp_path):
    facts_task(Context(), facts=str(SNAPS / "h200"), json=True, save=str(tmp_path / "again"))
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"][0]["name"] == "NVIDIA H200" and data["gpus"][0]["compute_cap"] == "9.0"
    assert data["driver"] == {"version": "580.159.04", "cuda": "13.0"}
    assert load(tmp_path / "again") == load(SNAPS / "h200"), "--save of a replay writes the same snapshot"


def test_human_report_names_what_a_user_checks():
    text = render_facts(parse(load(SNAPS / "h200")), load(SNAPS / "h200"))
    assert "gpu 0       NVIDIA H200, 143771 MiB, CC 9.0 (nvidia-smi), 00000000:00:06.0, MIG Disabled" in text
    assert "driver      580.159.04, CUDA 13.0; libcuda.so.580.159.04 matches" in text
    assert "torch 2.11.0 (CUDA 13.0)" in text and "problem" not in text


def test_human_report_ends_with_the_problems():
    text = render_facts(parse(load(SNAPS / "debian12-cpu")))
    assert "gpus        none found" in text
    assert text.splitlines()[-1].startswith("problem     no GPU found")
    assert "3.4 MiB in 1 shard(s)" in text and "MTP config no, MTP weights no" in text
