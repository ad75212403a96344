"""Each catalogue entry's detector fires on the recorded error line (its `symptom`, quoted from the
source URL in compat/doctor.yml) and stays quiet on healthy recorded targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.doctor.catalogue import load
from gpunode.doctor.checks import Evidence
from gpunode.doctor.detect import diagnose
from gpunode.facts import snapshot
from gpunode.facts.parse import parse

SNAPS = Path(__file__).resolve().parents[1] / "data" / "snapshots"


@pytest.mark.parametrize("entry", [e for e in load() if e.journal], ids=lambda e: e.id)
def test_journal_detector_fires_on_the_recorded_symptom(entry):
    facts = parse(snapshot.load(SNAPS / "debian12-cpu"))
    found = diagnose(Evidence("t", facts, journal=("starting", entry.symptom)))
    assert entry.id in [f.entry.id for f in found]


@pytest.mark.parametrize("name", ["h200", "debian12-cpu"])
def test_healthy_recorded_targets_have_no_finding(name):
    facts = parse(snapshot.load(SNAPS / name))
    assert diagnose(Evidence(name, facts, journal=("Uvicorn running on http://127.0.0.1:30001",))) == []
