"""The real configs in tests/data/models (each folder's SOURCE says where it came from),
config only, resolved on recorded GPU shapes: every plan is sized from the config, and the
family rules hold (MLA never trtllm_mha, gpt-oss never flashinfer, NVFP4 where the wheel's floor allows), and
every flag and value of every plan is one that tests/test_wheel_flags.py proves against the wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.model import parse_model
from gpunode.resolve import resolve
from gpunode.resolve.emittable import emittable
from gpunode.resolve.load import load
from tests.unit.resolve_facts import DATA, backend_of, on
from tests.unit.test_model_size_published import UNSIZED
from tests.unit.test_resolve_emittable import covered, plan_uses

KB = load()

MODELS = sorted(d for d in (DATA / "models").iterdir() if (d / "config.json").exists())
SHAPES = ("b200-x8", "h100-x8", "rtx-pro-6000-x8", "a100-x2-mig", "h200-x1")


# known wrong plans that another change fixes; strict, so the fix makes these fail until removed
# (shape, model) -> why its plan is known wrong today (strict: a fixed one fails until removed here)
OPEN: dict[tuple[str, str], str] = {}


def recorded(folder: Path):
    text = (folder / "config.json").read_text()
    quant = folder / "hf_quant_config.json"
    return parse_model(f"/models/{folder.name}", f"{len(text)} ./config.json", text, None,
                       quant.read_text() if quant.exists() else None, None)


def outcome(folder: Path, shape: str, **variables: object):
    if shape == "a100-x2-mig":   # GPU 1, whole: GPU 0's MIG devices show no UUID in the table (test_facts_mig.py)
        variables = {"gpus": [1], **variables}
    try:
        return resolve(on(shape, model=recorded(folder)), variables)
    except ResolveError as exc:
        return exc


@pytest.mark.parametrize("folder", MODELS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES)
def test_each_recorded_model_is_sized_from_its_config_and_keeps_its_family_rules(folder, shape, request):
    if (shape, folder.name) in OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN[(shape, folder.name)]))
    result = outcome(folder, shape)
    if isinstance(result, ResolveError):
        # too big, no code for the GPU, the pinned sglang's own refusal of the model, its custom code that
        # the pinned sglang must run (DeciLM; Kimi-K2 on 0.5.10.post1, the pin set of the recorded drivers
        # below 580) with trust_remote_code off, or the driver that the pin sets which serve it need
        # a family whose shapes the estimate does not know (UNSIZED) has no size to plan with: asked for, not guessed
        unsized = folder.name in UNSIZED and ": unknown size: " in result.message
        assert unsized or any(why in result.message for why in ("does not fit", "cannot run",
                                                               "needed by every SGLang pin set", "refuses it",
                                                               "trust_remote_code is off",
                                                               # the pinned sglang's registry lacks it,
                                                               # or no pinned venv configures its model type
                                                               "model registry", "knows model type")) or \
            "or set trust_remote_code: true (cu12-legacy" in result.hint, f"{result.message} / {result.hint}"
        return
    assert "estimated from config.json" in result.decision("model size").reason
    em = emittable(KB, KB.pinset(result.pinset))
    assert not [f"{u.flag} {u.value}" for u in plan_uses(result) if not covered(u, em)]
    chosen = backend_of(result)
    if "deepseek" in folder.name or "kimi" in folder.name:
        assert chosen != "trtllm_mha"
    if "gpt-oss" in folder.name:
        assert chosen in {"triton", "trtllm_mha", "fa3", "fa4"}


def test_kimi_k2_needs_all_eight_b200_and_fits_on_no_smaller_box():
    # the recorded B200's driver (575) gets sglang 0.5.10.post1, which reads Kimi-K2's config only with its code
    plan = outcome(DATA / "models" / "kimi-k2-instruct", "b200-x8", trust_remote_code=True)
    assert plan.topology.kind == "tensor-parallel" and plan.topology.tp == 8
    for shape in ("h100-x8", "rtx-pro-6000-x8", "h200-x1"):
        assert "does not fit" in outcome(DATA / "models" / "kimi-k2-instruct", shape, trust_remote_code=True).message


@pytest.mark.parametrize("name", ["qwen3.6-27b-nvfp4", "qwen3.6-35b-a3b-nvfp4"])
def test_modelopt_mixed_precision_checkpoints_are_nvfp4_and_run_from_8_0_where_the_wheel_says(name):
    assert recorded(DATA / "models" / name).quantization == "nvfp4"
    # the H200 report's driver takes every pin set: 0.5.23 runs ModelOpt FP4 there through Marlin
    assert outcome(DATA / "models" / name, "h200-x1").engine_version == "0.5.23"
    # the A100's driver (535) takes only cu12-legacy, whose sglang 0.5.10.post1 asks for 10.0
    err = outcome(DATA / "models" / name, "a100-x2-mig")
    assert "sglang 0.5.10.post1 runs modelopt_fp4 (nvfp4) from compute capability 10.0" in err.evidence
    assert not isinstance(outcome(DATA / "models" / name, "rtx-pro-6000-x8"), ResolveError)


@pytest.mark.parametrize(("shape", "vision"), [("h200-x1", "fa3"), ("b200-x8", "fa4"), ("rtx-pro-6000-x8", None)])
def test_a_vision_language_model_gets_its_vision_tower_backend_per_architecture(shape, vision):
    plan = outcome(DATA / "models" / "qwen3-vl-8b-instruct", shape)
    argv = plan.servers[0].argv
    if vision:
        assert argv[argv.index("--mm-attention-backend") + 1] == vision
    else:   # sm_120: fa3/fa4 do not exist there; sglang's own default is the one that runs
        assert "--mm-attention-backend" not in argv
        assert "triton_attn" in plan.decision("vision attention backend").reason
    assert not any("no family rule" in w for w in plan.warnings)
