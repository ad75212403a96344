"""What the node's judge did on a real H100 (tests/data/device/h100-judge/README.md): gpunode's own judge step
accepted five plans with SGLang's checks on the GPU and asked nothing the run after; a plan SGLang refuses on
that GPU alone failed the servers role in its first probe with SGLang's message and left the unit and env file
as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "device" / "h100-judge"


def node() -> dict:
    return json.loads((DATA / "node.json").read_text())


def test_it_ran_on_an_h100_with_the_planned_engine():
    rec = json.loads((DATA / "install.json").read_text())
    assert rec["nvidia_smi"]["stdout"].splitlines()[1] == "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 9.0"
    assert rec["imports"]["stdout"].split()[:4] == ["0.5.17", "0.6.15.post1", "5.12.1", "2.11.0+cu130"]


def test_each_plan_was_judged_once_and_the_run_after_asked_nothing():
    cases = node()["cases"]
    assert [c["case"] for c in cases] == ["hybrid", "mtp", "hybrid-moe", "mla", "gpt-oss"]
    for c in cases:
        [first], [again] = c["first"]["steps"], c["again"]["steps"]
        # the verdict is kept by the check itself (nodecheck --record, the run holding the target's lock alone)
        assert first["status"] == "ok" and first["reason"].startswith("sglang accepts the arguments of gpu0 (its "
                                                                      "own checks, ") and "kept" in first["reason"]
        assert again["status"] == "ok" and "accepted these arguments before" in again["reason"]
        assert c["first"]["round_trips"] == c["again"]["round_trips"] == 1
        assert c["again"]["s"] < 0.5 < 5 < c["first"]["s"]   # the engine's import is the cost, and only once


def test_the_plan_sglang_refuses_on_this_gpu_changed_nothing():
    refused = node()["refused"]
    assert refused["argv"][-2:] == ["--prefill-attention-backend", "trtllm_mha"]
    judge, *rest = refused["steps"]
    assert judge["status"] == "failed" and "TRTLLM MHA backend for prefill is only supported on Blackwell" in \
        judge["reason"] and "raised at srt/server_args.py:" in judge["reason"]
    assert "nothing was changed" in judge["reason"]
    assert refused["changed"] == 0 and refused["files_unchanged"]
    assert set(refused["files_before"]) == {"/etc/gpunode/gpu0.env", "/etc/systemd/system/gpunode-gpu0.service"}
    written = [s for s in rest if s["step"].startswith("file:") or s["step"] == "generation"]
    assert written and all(s["status"] == "skipped" for s in written)
    # the only other failures: the service probes asking a systemctl the lent machine has not
    assert all("systemctl exit code 127" in s["reason"] for s in rest if s["status"] == "failed")
    assert refused["rolled_back"].startswith("not upgraded, the servers keep what they ran")


def test_cis_judge_child_on_the_gpu_accepts_the_staged_plans_and_refuses_no_buffer_with_overlap():
    rec = json.loads((DATA / "judge-staged.json").read_text())
    verdicts = {v["id"]: v for v in rec["verdicts"]}
    refused = verdicts.pop("no_buffer-with-overlap")
    assert refused["accepted"] is False and refused["where"].endswith("(_validate_mamba_no_buffer)")
    assert set(verdicts) == {"hybrid", "mtp", "mtp-off", "hybrid-moe", "mla", "gpt-oss"}
    assert all(v["accepted"] is True for v in verdicts.values())
    assert "GPUNODE_JUDGE_STANDINS" not in rec["env"]
