"""Issue 38's GPU reports (tests/data/gpu-reports/README.md, "Reports for issue 38"): newest GPUs and
drivers first (B200 on R610, H100 NVL and A800 on R580, GB200's check_env), MIG-enabled boxes, and
R375-R535 drivers, each read as `inv resolve --nvidia-smi FILE` reads it and planned with a 16 GB
dense model. What a user checks: what the file shows was read, and the plan or the refusal is the
right one for it, saying what to do."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.cli.resolve import offline_facts
from gpunode.errors import GpunodeError
from gpunode.facts import gpu_report
from gpunode.facts.types import Model
from gpunode.resolve import resolve

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu-reports"
MODEL = Model(path="/srv/models/qwen3", architectures=("Qwen3ForCausalLM",), model_type="qwen3", dtype="bfloat16",
              size_bytes=16 * 10**9, size_source="files on disk")

# file, format, GPU count, names, compute capabilities, driver, CUDA of the driver, outcome: "plan N" (servers,
# CUDA_VISIBLE_DEVICES one GPU each) or a phrase of the refusal
CASES = [
    ("table-b200-x2-r610-cut.txt", gpu_report.TABLE, 2, {"NVIDIA B200"}, {"10.0"}, "610.43.02", "13.3", "plan 2"),
    ("table-h100-nvl-x2-r580-cut.txt", gpu_report.TABLE, 2, {"NVIDIA H100 NVL"}, {"9.0"}, "580.95.05", "13.0",
     "plan 2"),
    ("table-a800-pcie-x2-r580-cut.txt", gpu_report.TABLE, 2, {"NVIDIA A800 80GB PCIe"}, {"8.0"}, "580.119.02",
     "13.0", "plan 2"),
    ("check_env-gb200-x4-r570-cut.txt", gpu_report.CHECK_ENV, 4, {"NVIDIA GB200"}, {"10.0"}, "570.172.08", None,
     "driver 570.172.08 < 580"),
    ("table-h100-x2-r535-cut.txt", gpu_report.TABLE, 2, {"NVIDIA H100 80GB HBM3"}, {"9.0"}, "535.129.03", "12.2",
     "plan 2"),
    ("xml-rtx4090-r535.xml", gpu_report.XML, 1, {"NVIDIA GeForce RTX 4090"}, {"8.9"}, "535.86.05", "12.2", "plan 1"),
    ("table-a800-sxm4-mig-r535-cut.txt", gpu_report.TABLE, 1, {"NVIDIA A800-SXM4-80GB"}, {"8.0"}, "535.86.10", "12.2",
     "has MIG enabled and the facts show no MIG device on it"),
    ("table-a100-80g-pcie-x2-mig-r520-cut.txt", gpu_report.TABLE, 2, {"NVIDIA A100 80G..."}, {"8.0"}, "520.61.05",
     "11.8", "has MIG enabled and the facts show no MIG device on it"),
    ("table-rtx4070-r550.txt", gpu_report.TABLE, 1, {"NVIDIA GeForce RTX 4070"}, {"8.9"}, "550.40.07", "12.4",
     "does not fit on 1 GPU(s)"),
    ("xml-rtx3060-laptop-r515.xml", gpu_report.XML, 1, {"NVIDIA GeForce RTX 3060 Laptop GPU"}, {"8.6"}, "515.65.01",
     "11.7", "driver 515.65.01 < 525"),
    ("xml-tesla-p100-r510.xml", gpu_report.XML, 1, {"Tesla P100-PCIE-16GB"}, {None}, "510.47.03", "11.6",
     "GPU 0 (Tesla P100-PCIE-16GB) is unknown"),
    ("q-a100-sxm4-80gb-r470-cut.txt", gpu_report.Q, 1, {"NVIDIA A100-SXM4-80GB"}, {"8.0"}, "470.103.01", "11.4",
     "driver 470.103.01 < 525"),
    ("table-rtx30xx-r470-truncated-name.txt", gpu_report.TABLE, 1, {"NVIDIA GeForce ..."}, {None}, "470.57.02",
     "11.4", "the table cut it short"),
    ("table-titan-xp-r450.txt", gpu_report.TABLE, 1, {"TITAN Xp"}, {None}, "450.57", "11.0", "is unknown"),
    ("q-quadro-p2200-r450-cut.txt", gpu_report.Q, 1, {"Quadro P2200"}, {None}, "450.80.02", "11.0", "is unknown"),
    ("q-rtx2080ti-x4-r430-cut.txt", gpu_report.Q, 1, {"GeForce RTX 2080 Ti"}, {"7.5"}, "430.26", "10.2",
     "compute capability 7.5, which no row in gpus.yml describes"),
    ("q-quadro-m1000m-r375-cut.txt", gpu_report.Q, 1, {"Quadro M1000M"}, {None}, "375.82", None, "is unknown"),
    # the second collection (README.md, "second collection"): B200 on R570-R590 in check_env, H200, L40S,
    # H100 NVL behind a vGPU hook, RTX PRO 6000 with its name cut, RTX 50xx on R570/R595, an RTX 3060 on a Pi
    ("check_env-b200-x4-r570-topology8.txt", gpu_report.CHECK_ENV, 4, {"NVIDIA B200"}, {"10.0"}, "570.172.08", None,
     "plan 4"),     # the topology lists eight GPUs; the four the header names are the ones torch saw
    ("check_env-b200-x8-r570-nics16.txt", gpu_report.CHECK_ENV, 8, {"NVIDIA B200"}, {"10.0"}, "570.172.08", None,
     "plan 8"),
    ("check_env-b200-x8-r580-tabs.txt", gpu_report.CHECK_ENV, 8, {"NVIDIA B200"}, {"10.0"}, "580.95.05", None,
     "plan 8"),
    ("check_env-b200-x8-r590.txt", gpu_report.CHECK_ENV, 8, {"NVIDIA B200"}, {"10.0"}, "590.48.01", None,
     "plan 8"),
    ("check_env-h200-x8-r550-vllm-log-first.txt", gpu_report.CHECK_ENV, 8, {"NVIDIA H200"}, {"9.0"}, "550.127.05",
     None, "plan 8"),
    ("check_env-a100-x2-r535-driver-twice.txt", gpu_report.CHECK_ENV, 2, {"NVIDIA A100-SXM4-80GB"}, {"8.0"},
     "535.54.03", None, "plan 2"),
    ("check_env-a100-x1-r535-no-cc.txt", gpu_report.CHECK_ENV, 1, {"NVIDIA A100-SXM4-80GB"}, {"8.0"}, "535.54.03",
     None, "plan 1"),
    ("table-h200-x2-r550-prompt-cut.txt", gpu_report.TABLE, 2, {"NVIDIA H200"}, {"9.0"}, "550.144.03", "12.4",
     "plan 2"),
    ("table-h100-nvl-vgpu-hook-r550-cut.txt", gpu_report.TABLE, 1, {"NVIDIA H100 NVL"}, {"9.0"}, "550.90.07", "12.4",
     "plan 1"),
    ("table-a800-x2-r550-full-memory-cut.txt", gpu_report.TABLE, 2, {"NVIDIA A800 80GB PCIe"}, {"8.0"}, "550.54.15",
     "12.4", "plan 2"),
    ("table-l40s-r550-container.txt", gpu_report.TABLE, 1, {"NVIDIA L40S"}, {"8.9"}, "550.90.07", "12.4", "plan 1"),
    ("table-rtx-pro-6000-r580-cut-name.txt", gpu_report.TABLE, 1, {"NVIDIA RTX PRO 6000 Blac..."}, {"12.0"},
     "580.105.08", "13.0", "plan 1"),
    ("table-rtx5090-r595.txt", gpu_report.TABLE, 1, {"NVIDIA GeForce RTX 5090"}, {"12.0"}, "595.71.05", "13.2",
     "plan 1"),
    ("table-rtx5070-r570-k8s-prompt.txt", gpu_report.TABLE, 1, {"NVIDIA GeForce RTX 5070"}, {"12.0"}, "570.133.07",
     "12.8", "does not fit on 1 GPU(s)"),
    ("table-rtx3060-aarch64-pi-r580.txt", gpu_report.TABLE, 1, {"NVIDIA GeForce RTX 3060"}, {"8.6"}, "580.95.05",
     "13.0", "does not fit on 1 GPU(s)"),
]
# reports that hold no GPU gpunode can plan with: (file, format, driver, what the refusal says is missing)
UNREADABLE = [
    ("check_env-gb10-flattened-quote.txt", gpu_report.CHECK_ENV, None, "the report's lines were joined into one"),
    ("collect_env-a100-sxm4-80gb-sections-cut.txt", gpu_report.COLLECT_ENV, None,
     "cut off inside its GPU list ('GPU' after 'GPU 0: NVIDIA A100-SXM4-80GB')"),
    ("collect_env-rocm-mi250-tf-log-cut.txt", gpu_report.AMD, None, "AMD"),
    ("q-rtx-pro-6000-x4-memory-performance-r580-cut.txt", gpu_report.Q, "580.105.06", "no GPU rows in it"),
    ("table-l20-x8-r590-no-borders.txt", gpu_report.TABLE, "590.48.01", "no GPU rows in it"),
    ("table-wsl-smi545-driver576-cut.txt", gpu_report.TABLE, "576.02", "no GPU rows in it"),
]
NAMES = {c[0] for c in CASES} | {u[0] for u in UNREADABLE} | {"nvml-mismatch-r465.txt"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_report_is_read_and_planned_or_refused_for_what_it_shows(case):
    name, fmt, count, names, ccs, driver, cuda, outcome = case
    report = gpu_report.read_report((DATA / name).read_text())
    assert report.format == fmt
    assert (len(report.gpus), {g.name for g in report.gpus}, {g.compute_cap for g in report.gpus}) == \
        (count, names, ccs)
    assert (report.driver.version, report.driver.cuda) == (driver, cuda)
    facts = replace(offline_facts(str(DATA / name), None), model=MODEL)
    if outcome.startswith("plan "):
        plan = resolve(facts, {})
        assert [s.cuda_visible_devices for s in plan.servers] == [str(i) for i in range(int(outcome[5:]))]
        return
    with pytest.raises(GpunodeError) as info:
        resolve(facts, {})
    assert outcome in info.value.message, info.value.message
    assert info.value.hint


def test_a_table_cut_inside_the_last_gpu_takes_that_gpus_memory_from_the_product():
    plan = resolve(replace(offline_facts(str(DATA / "table-h100-x2-r535-cut.txt"), None), model=MODEL), {})
    assert "H100" in plan.decision("gpu memory").reason and plan.decision("gpu memory").source.startswith("https://")


def test_a_truncated_name_is_refused_asking_for_the_output_that_prints_it_whole():
    with pytest.raises(GpunodeError) as info:
        resolve(replace(offline_facts(str(DATA / "table-rtx30xx-r470-truncated-name.txt"), None), model=MODEL), {})
    assert "nvidia-smi -q" in info.value.hint and "--query-gpu" in info.value.hint


def test_an_nvml_mismatch_without_the_library_line_is_still_named():
    report = gpu_report.read_report((DATA / "nvml-mismatch-r465.txt").read_text())
    message, hint = gpu_report.refusal("smi.txt", report)
    assert report.format == gpu_report.NVML and "reload the nvidia module or reboot" in message


@pytest.mark.parametrize("case", UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_a_report_without_a_plannable_gpu_is_refused_saying_what_it_lacks(case):
    name, fmt, driver, missing = case
    report = gpu_report.read_report((DATA / name).read_text())
    assert (report.format, report.gpus, report.driver.version) == (fmt, (), driver)
    with pytest.raises(GpunodeError) as info:
        offline_facts(str(DATA / name), None)
    assert missing in info.value.message, info.value.message
    assert info.value.hint


def test_a_collect_env_cut_inside_its_gpu_list_is_not_planned_on_the_gpus_before_the_cut():
    # before: planned on GPU 0 alone, the seven after it unseen (vllm-project/vllm#27430's eight A100s)
    report = gpu_report.read_report((DATA / "collect_env-a100-sxm4-80gb-sections-cut.txt").read_text())
    assert not report.gpus and "GPUs after those shown are missing" in report.missing
