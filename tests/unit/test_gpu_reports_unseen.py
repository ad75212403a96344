"""Issue 28: GPU reports of kinds the other tests never saw, collected from public threads
(tests/data/gpu-reports/README.md, "Reports for issue 28"), each resolved the way `inv resolve
--nvidia-smi FILE --model DIR` does (cli/resolve.offline_facts, then the resolver).

What a user checks: the plan's topology fits the GPUs' memory (from the report, else NVIDIA's
figure for the product, never assumed), or the refusal says what is wrong and a hint that can work.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.cli.resolve import offline_facts
from gpunode.errors import GpunodeError
from gpunode.facts.types import Model
from gpunode.resolve import resolve

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu-reports"
GB = 10**9


def model(size_gb: float) -> Model:
    """A dense Qwen3 checkpoint of the given size (the model side is not what these tests are about)."""
    return Model(path="/srv/models/qwen3", architectures=("Qwen3ForCausalLM",), model_type="qwen3",
                 dtype="bfloat16", size_bytes=int(size_gb * GB), size_source="files on disk")


def plan(name: str, size_gb: float, variables: dict | None = None):
    facts = replace(offline_facts(str(DATA / name), None), model=model(size_gb))
    return resolve(facts, variables)


def refusal(name: str, size_gb: float = 16) -> GpunodeError:
    with pytest.raises(GpunodeError) as info:
        plan(name, size_gb)
    return info.value


# file, weights (GB), tensor parallelism the memory calls for, what the GPU memory is read from
PLANS = [
    ("check_env-h20-x8.txt", 200, 4, "H20 has 96 GB"),                    # 65 GB per H20 for weights
    ("check_env-h20-x8.txt", 60, 1, "H20 has 96 GB"),
    ("collect_env-a10-x3.txt", 30, 2, "A10 has 24 GB"),                   # 16.3 GB per A10: two of three
    ("collect_env-l20-x2.txt", 60, 2, "L20 has 48 GB"),
    ("table-a10g-r535.txt", 8, 1, "nvidia-smi"),
    ("table-l4-x1-r570.txt", 8, 1, "nvidia-smi"),
    ("table-l4-x2-r555-cut.txt", 20, 2, "nvidia-smi"),
    ("table-rtx3090-r595-cut.txt", 20, 2, "nvidia-smi"),
    ("check_env-h20-x8-r535.txt", 60, 1, "H20 has 96 GB"),
]


@pytest.mark.parametrize("name, size_gb, tp, memory", PLANS, ids=[f"{p[0]}-{p[1]}GB" for p in PLANS])
def test_memory_comes_from_the_report_or_the_product_never_assumed(name, size_gb, tp, memory):
    p = plan(name, size_gb)
    assert p.topology.tp == tp, p.decision("topology").fact
    assert not any("assumes the weights fit" in w for w in p.warnings)
    if memory == "nvidia-smi":
        assert not any(d.decision == "gpu memory" for d in p.decisions)
    else:
        assert memory in p.decision("gpu memory").reason and p.decision("gpu memory").source.startswith("https://")


def test_a_model_bigger_than_the_gpus_is_refused_not_planned_on_one():
    err = refusal("check_env-h20-x8.txt", 700)   # 8 x 65 GB is not enough for 700 GB
    assert "does not fit on 8 GPU(s)" in err.message


def test_gh200_on_driver_560_is_refused_for_the_driver_and_never_given_the_x86_only_stack():
    # The CUDA 12 pin set would take driver 560, but it has no aarch64 wheels: the report's
    # "OS: ... (aarch64)" says so, and so would the product (every GH200 is a Grace system).
    err = refusal("collect_env-gh200-144g-x1-vllm-sections.txt")
    assert err.message.startswith("driver 560.35.05 < 580") and "upgrade the host's NVIDIA driver to >= 580" in err.hint
    assert "cu12-legacy (sglang 0.5.10.post1): aarch64 has no wheels in cu12-legacy" in err.evidence
    facts = offline_facts(str(DATA / "collect_env-gh200-144g-x1-vllm-sections.txt"), None)
    unprobed = replace(facts, system=replace(facts.system, arch=""), model=model(8))
    with pytest.raises(GpunodeError) as info:
        resolve(unprobed)
    assert "aarch64 has no wheels in cu12-legacy" in info.value.evidence


def test_a10g_memory_comes_from_its_product_when_the_q_output_is_cut_before_it():
    facts = replace(offline_facts(str(DATA / "q-a10g-r510-cut.txt"), None), model=model(8))
    with pytest.raises(GpunodeError) as info:      # driver 510 is below every pin set's floor
        resolve(facts)
    assert "driver 510.85.02 < 525" in info.value.message
    from gpunode.facts.types import Driver
    p = resolve(replace(facts, driver=Driver("550.90.07", "12.4")))
    assert "A10G has 24 GB" in p.decision("gpu memory").reason and p.topology.tp == 1


# file, words of the refusal's message, words of its hint (and what the hint must not say)
REFUSALS = [
    ("check_env-t4-x2.txt", "compute capability 7.5, which no row", "only vllm can run on it"),
    ("check_env-rtx2080ti-x10-no-cc.txt", "compute capability 7.5, which no row", "only vllm can run on it"),
    ("table-v100-sxm2-r470.txt", "compute capability 7.0 (sm_70): no released wheel", "8.0 or newer"),
    # the stored copy ends on "GPU 2: Tesla V100S-PCIE-32GB": the list (and that name) may go on
    ("collect_env-v100s-x3-cut.txt", "cut off on GPU 2's name line", "nvidia-smi --query-gpu="),
    ("check_env-mi300x-x8-rocm.txt", "AMD", "AMD GPUs are not supported"),
    ("check_env-mi300x-vf-x8-rocm72.txt", "AMD", "AMD GPUs are not supported"),
    ("collect_env-rocm-mi250x.txt", "AMD", "AMD GPUs are not supported"),
    ("collect_env-rocm-device-66a1.txt", "AMD", "AMD GPUs are not supported"),
    ("collect_env-b300-cut.txt", "ends before its GPU list", "nvidia-smi --query-gpu="),
    # Jetson Thor (11.0): the aarch64 kernel wheels have sm_110a, vLLM sm_110: a gpus.yml row is what is missing
    ("collect_env-thor-x1-vllm-sections.txt", "compute capability 11.0, which no row in gpus.yml",
     "only sglang, vllm can run on it: add an architecture row for 11.0"),
]


# Every file this module resolves (tests/unit/test_facts_reports.py checks each recorded file has a case)
NAMES = {p[0] for p in PLANS} | {r[0] for r in REFUSALS} | {"q-a10g-r510-cut.txt",
                                                            "collect_env-gh200-144g-x1-vllm-sections.txt"}


@pytest.mark.parametrize("name, message, hint", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_say_what_is_wrong_and_a_hint_that_can_work(name, message, hint):
    err = refusal(name)
    assert message in err.message and hint in err.hint, f"{err.message}\nhint: {err.hint}"
    assert "add a row" not in err.hint and "add the product" not in err.hint


def test_a_report_cut_inside_a_gpu_name_is_refused_not_read_as_another_gpu(tmp_path):
    # The H20 report cut after "NVIDIA H2": no product, but a cut "NVIDIA A10" of an A100 would be one.
    text = (DATA / "check_env-h20-x8.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[:text.index("NVIDIA H20") + len("NVIDIA H2")])
    with pytest.raises(GpunodeError) as info:
        offline_facts(str(cut), None)
    assert "cut off" in info.value.message and "GPU 7" in info.value.message
    assert "nvidia-smi --query-gpu=" in info.value.hint


def test_unknown_memory_and_an_unknown_product_plan_only_what_fits_the_smallest_card(tmp_path):
    # The L20 report with a name no table knows, compute capability from the report: 8.9.
    text = (DATA / "check_env-a40-x1.txt").read_text().replace("NVIDIA A40", "NVIDIA L9X").replace(": 8.6", ": 8.9")
    path = tmp_path / "check_env.txt"
    path.write_text(text)
    small = resolve(replace(offline_facts(str(path), None), model=model(4)))
    assert small.topology.tp == 1 and any("smallest card of compute capability 8.9" in w for w in small.warnings)
    with pytest.raises(GpunodeError) as info:
        resolve(replace(offline_facts(str(path), None), model=model(40)))
    assert "would not fit the smallest card of compute capability 8.9" in info.value.message
    assert "no plan assumes a fit" in info.value.message and "--query-gpu=" in info.value.hint
    # tp from the inventory: a tenth of 40 GB per GPU fits even the smallest card (only one GPU here)
    with pytest.raises(GpunodeError) as info:
        resolve(replace(offline_facts(str(path), None), model=model(40)), {"tp": 8})
    assert "only 1 GPU(s) are selected" in info.value.message


def test_an_x86_only_pin_set_for_a_host_of_unknown_architecture_is_said_not_silent():
    # check_env names no CPU architecture and H20 systems come with either: the plan says so
    p = plan("check_env-h20-x8.txt", 60)
    assert p.pinset == "cu12-legacy"  # driver 550: the CUDA 13 pin sets need 580
    assert "the target's CPU architecture is unknown; cu12-legacy has wheels for x86_64 only" in p.warnings
    # collect_env's OS line says x86_64: nothing to warn about
    assert not any("CPU architecture" in w for w in plan("collect_env-a10-x3.txt", 8).warnings)


def test_explain_cites_the_gpu_code_read_from_the_kernel_wheel():
    code = plan("table-l4-x1-r570.txt", 8).decision("gpu code")
    assert code.value == "sglang-kernel 0.4.1 runs on sm_89"  # driver 570: the CUDA 12 pin set
    assert "(x86_64): SASS sm_80, sm_89" in code.reason and "kernel_sms.yml" in code.rule


def test_thor_evidence_names_the_wheels_of_its_own_machine_only():
    err = refusal("collect_env-thor-x1-vllm-sections.txt")
    assert "sglang-kernel 0.4.10 (aarch64): SASS sm_90, sm_100f, sm_110a" in err.evidence
    assert "(x86_64)" not in err.evidence  # the report's OS line says aarch64
