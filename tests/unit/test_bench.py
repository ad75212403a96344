"""inv bench's arithmetic on recorded real results (tests/data/bench/README.md says where from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.bench import eta, schema, stats
from gpunode.bench.inputs import BenchInputError, concurrencies, job_file

DATA = Path(__file__).resolve().parents[1] / "data" / "bench"
RUN1, RUN2 = DATA / "lab-cpu-c1-8-run1.json", DATA / "lab-cpu-c1-8-run2.json"


def test_the_field_notes_arithmetic_400_tok_s_per_gpu_on_4_gpus():
    seconds = eta.eta_seconds(902_000, 1750, 4 * 400)
    assert seconds == 902_000 * 1750 / 1600
    # samples x tokens / rate is 11.4 days; the field notes' "about 16.5 days" is what a
    # total of ~1,107 tok/s (277 per GPU) gives, not 4 x 400: their estimate had another input.
    assert round(seconds / 86400, 1) == 11.4
    assert round(902_000 * 1750 / (16.5 * 86400)) == 1107
    assert eta.duration(seconds) == "11.4 days"


def test_eta_takes_the_fastest_clean_step_and_says_which():
    doc = schema.load(RUN1)
    e = eta.estimate(doc["runs"], 902_000, 1750, 32, "--job-samples")
    best = max(doc["runs"], key=lambda r: r["total"]["output_tok_s"])
    assert e["measurement"]["phase"] == best["phase"] and e["measurement"]["concurrency"] == best["concurrency"]
    assert e["seconds"] == pytest.approx(902_000 * 1750 / best["total"]["output_tok_s"])
    assert e["notes"] and "--output-len 1750" in e["notes"][0]
    assert f"concurrency {best['concurrency']} per server" in eta.sentence(e)


def test_summaries_recompute_from_the_recorded_requests():
    doc = schema.load(RUN1)
    for run in doc["runs"]:
        raw = {name: ep["records"] for name, ep in run["endpoints"].items()}
        assert stats.step_total(raw) == run["total"]
        for ep in run["endpoints"].values():
            assert stats.endpoint_summary(ep["records"]) == ep["summary"]
            s = ep["summary"]
            assert s["output_tok_s"] > 0 and s["errors"] == 0
            assert s["ttft_s"]["p50"] <= s["ttft_s"]["p90"] <= s["ttft_s"]["p99"] <= s["latency_s"]["p99"]


def test_percentile_interpolates_like_numpy():
    assert stats.percentile([1, 2], 50) == 1.5
    assert stats.percentile([3, 1, 2, 4, 5], 90) == pytest.approx(4.6)
    assert stats.spread([])["p99"] is None


def test_compare_matches_rows_and_gives_the_change():
    cmp = schema.compare(schema.load(RUN1), schema.load(RUN2))
    assert cmp["settings_differ"] == [] and cmp["unmatched"] == []
    row = next(r for r in cmp["rows"] if r["phase"] == "servers" and r["concurrency"] == 8
               and r["endpoint"] == "(total)")
    old, new = row["output_tok_s"]["old"], row["output_tok_s"]["new"]
    assert row["output_tok_s"]["change_pct"] == pytest.approx((new - old) / old * 100)


def test_a_result_of_another_schema_major_is_refused(tmp_path):
    doc = json.loads(RUN1.read_text())
    doc["schema"] = "gpunode.bench/2"
    (tmp_path / "new.json").write_text(json.dumps(doc))
    with pytest.raises(BenchInputError, match="schema gpunode.bench/2; this gpunode reads gpunode.bench/1"):
        schema.load(tmp_path / "new.json")


def test_bad_inputs_name_what_is_wrong(tmp_path):
    with pytest.raises(BenchInputError, match="not a list of whole numbers"):
        concurrencies("4,x")
    assert concurrencies("16,1,4,4") == [1, 4, 16]
    job = tmp_path / "job.jsonl"
    job.write_text('{"prompt": "a", "max_tokens": 100}\n\n{"prompt": "b", "max_tokens": 300}\nnot json\n')
    with pytest.raises(BenchInputError, match="line 4 is not JSON"):
        job_file(job)
    job.write_text('{"prompt": "a", "max_tokens": 100}\n{"prompt": "b", "max_tokens": 300}\n')
    assert job_file(job) == (2, 200.0)
