"""MIG: devices read from every format that shows them, one server per MIG device, never a
whole-GPU server on a MIG-enabled GPU (tests/data/gpu-reports/README.md says where each file came from)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.errors import ResolveError
from gpunode.facts import gpu, gpu_report
from gpunode.facts.probe import _snippets
from gpunode.facts.types import Driver, Facts, Install
from gpunode.resolve import resolve
from tests.unit.resolve_facts import DATA, KPRO6_CT, TINY_QWEN3, smi

REPORTS = DATA / "gpu-reports"
MIG_FILES = {"xml-a100-sxm4-40gb-mig-r510.xml", "list-a100-sxm4-80gb-mig-7x1g10gb-r535.txt",
             "list-a100-80gb-pcie-mig-2x3g40gb-lxc-r530.txt", "list-a100-sxm4-80gb-x4-mig-on-gpu0.txt",
             "table-rtx-pro-6000-x3-mig-on-gpu2-cut.txt", "collect_env-a100-sxm4-80gb-mig-2x3g40gb-cut.txt",
             "list-h100-x2-mig-2g20gb-1g10gb-on-gpu0-r580.txt"}
# a driver every pin set runs on, so that the MIG rules are what a plan meets first
DRIVER = Driver("580.126.09", "13.0")


def read(name: str) -> gpu_report.Report:
    return gpu_report.read_report((REPORTS / name).read_text())


def facts_of(gpus: tuple, model=TINY_QWEN3) -> Facts:
    return Facts("mig-box", gpus, DRIVER, KPRO6_CT, Install(), model)


def plan_or_refusal(gpus: tuple, variables: dict | None = None, model=TINY_QWEN3):
    try:
        return resolve(facts_of(gpus, model), variables or {})
    except ResolveError as exc:
        return exc


@pytest.mark.parametrize(("name", "gpu_index", "profiles"), [
    ("list-a100-sxm4-80gb-mig-7x1g10gb-r535.txt", 0, ["1g.10gb"] * 7),
    ("list-a100-80gb-pcie-mig-2x3g40gb-lxc-r530.txt", 0, ["3g.40gb"] * 2),
    ("list-a100-sxm4-80gb-x4-mig-on-gpu0.txt", 0, ["1g.20gb"] * 4),
    ("list-h100-x2-mig-2g20gb-1g10gb-on-gpu0-r580.txt", 0, ["2g.20gb", "1g.10gb"]),
])
def test_list_gives_each_mig_device_its_profile_and_uuid(name, gpu_index, profiles):
    r = read(name)
    g = r.gpus[gpu_index]
    assert g.mig_mode == "Enabled"
    assert [d.profile for d in g.mig_devices] == profiles
    assert [d.index for d in g.mig_devices] == list(range(len(profiles)))
    assert all(d.uuid.startswith("MIG-") and d.memory_mib is None for d in g.mig_devices)
    assert len({d.uuid for d in g.mig_devices}) == len(profiles)


def test_collect_env_keeps_the_mig_lines_of_its_nvidia_smi_l_copy():
    r = read("collect_env-a100-sxm4-80gb-mig-2x3g40gb-cut.txt")
    (g,) = r.gpus
    assert (g.name, g.mig_mode, r.driver.version) == ("NVIDIA A100-SXM4-80GB", "Enabled", "535.161.08")
    assert [(d.index, d.profile, d.uuid) for d in g.mig_devices] == [(0, "3g.40gb", ""), (1, "3g.40gb", "")]


def test_list_with_mig_on_one_gpu_of_four_leaves_the_others_whole():
    gpus = read("list-a100-sxm4-80gb-x4-mig-on-gpu0.txt").gpus
    assert [(g.index, g.mig_mode, len(g.mig_devices)) for g in gpus] == [
        (0, "Enabled", 4), (1, "", 0), (2, "", 0), (3, "", 0)]


def test_xml_reads_the_gpus_memory_past_the_mig_devices_listed_before_it():
    (g,) = read("xml-a100-sxm4-40gb-mig-r510.xml").gpus
    assert g.memory_mib == 40960, "the first <fb_memory_usage> in the block is a MIG device's 19968 MiB"
    assert [(d.index, d.gpu_instance, d.compute_instance, d.memory_mib, d.uuid) for d in g.mig_devices] == [
        (0, 1, 0, 19968, ""), (1, 2, 0, 19968, "")]


def test_table_reads_the_mig_devices_section():
    gpus, _ = smi("a100-x2-mig")
    assert [(d.index, d.gpu_instance, d.memory_mib) for d in gpus[0].mig_devices] == [
        (0, 3, 9856), (1, 4, 9856), (2, 5, 9856), (3, 6, 9856)]
    assert gpus[1].mig_devices == ()


def test_q_text_reads_the_mig_devices_of_each_gpu():
    # `nvidia-smi -q` prints the XML's fields as indented "Key : value" lines; this block holds the
    # recorded XML's two devices in that layout (no -q text with MIG devices was found in the corpora)
    q = """Driver Version                            : 510.47.03
CUDA Version                              : 11.6

Attached GPUs                             : 1
GPU 00000000:00:04.0
    Product Name                          : NVIDIA A100-SXM4-40GB
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Devices
        MIG Device
            Index                         : 0
            GPU Instance ID               : 1
            Compute Instance ID           : 0
            FB Memory Usage
                Total                     : 19968 MiB
                Used                      : 19 MiB
            BAR1 Memory Usage
                Total                     : 32767 MiB
        MIG Device
            Index                         : 1
            GPU Instance ID               : 2
            Compute Instance ID           : 0
            FB Memory Usage
                Total                     : 19968 MiB
    GPU UUID                              : GPU-27b94a00-ed54-5c24-b1fd-1054085de32a
    FB Memory Usage
        Total                             : 40960 MiB
"""
    (g,) = gpu.parse_q(q).gpus
    assert g.memory_mib == 40960 and g.mig_mode == "Enabled"
    assert [(d.index, d.gpu_instance, d.memory_mib) for d in g.mig_devices] == [(0, 1, 19968), (1, 2, 19968)]


def test_the_probe_asks_nvidia_smi_for_the_mig_uuids():
    listing = next(s for s in _snippets() if s.name == "nvidia_smi_list")
    assert listing.body.endswith("nvidia-smi -L") and listing.cached is not None


# -- planning ----------------------------------------------------------------------------------


def assembled_a100_x2_mig():
    """ASSEMBLED, not recorded: the recorded a100-x2-mig table with `-L` lines for its four MIG devices
    (their UUIDs invented): what the probe reads on that box, table and -L together."""
    table = (DATA / "nvidia-smi" / "a100-x2-mig" / "nvidia-smi.txt").read_text()
    listing = "GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\n" + "".join(
        f"  MIG 2g.10gb     Device  {i}: (UUID: MIG-0000000{i}-0000-5000-8000-000000000000)\n" for i in range(4)) + \
        "GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-11111111-1111-1111-1111-111111111111)\n"
    gpus, _, _ = gpu.gpus_and_driver(None, table, None, None, listing)
    return gpus


def test_one_server_per_mig_device_named_by_its_uuid():
    plan = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [0]})
    assert not isinstance(plan, ResolveError), plan
    assert plan.topology.kind == "mig" and plan.topology.tp == 1
    assert [s.name for s in plan.servers] == [f"gpu0-mig{i}" for i in range(4)]
    assert [plan.server_env(s)["CUDA_VISIBLE_DEVICES"] for s in plan.servers] == [
        f"MIG-0000000{i}-0000-5000-8000-000000000000" for i in range(4)]
    assert "9856 MiB" in plan.decision("mig").fact
    assert "--tp-size" not in plan.servers[0].argv and "--tensor-parallel-size" not in plan.servers[0].argv


def test_a_model_larger_than_one_mig_device_is_refused_not_split_across_devices():
    big = replace(TINY_QWEN3, size_bytes=12 * 10**9)   # fits a whole 40 GB GPU, not a 9856 MiB MIG device
    err = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [0]}, big)
    assert isinstance(err, ResolveError)
    assert "does not fit one MIG device" in err.message and "enumerates a single MIG device" in err.message
    assert "MIG" in err.hint


def test_tensor_parallelism_across_mig_devices_is_refused_with_the_reason():
    err = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [0], "tp": 2})
    assert isinstance(err, ResolveError) and err.message.startswith("tp: 2 across MIG devices")
    assert "no CUDA IPC or NVLink" in err.message


def test_mig_and_whole_gpus_in_one_box_must_be_chosen_apart():
    err = plan_or_refusal(assembled_a100_x2_mig())
    assert isinstance(err, ResolveError) and "GPUs [0] have MIG enabled and GPUs [1] do not" in err.message
    assert "gpus: [0]" in err.hint and "gpus: [1]" in err.hint
    plan = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [1]})
    assert [plan.server_env(s)["CUDA_VISIBLE_DEVICES"] for s in plan.servers] == ["1"]


@pytest.mark.parametrize(("name", "variables", "said", "hint"), [
    ("xml-a100-sxm4-40gb-mig-r510.xml", {}, "the UUIDs of MIG devices [0, 1] are not in the facts", "nvidia-smi -L"),
    ("list-a100-sxm4-80gb-mig-7x1g10gb-r535.txt", {}, "the memory of MIG devices [0, 1, 2, 3, 4, 5, 6]",
     "`nvidia-smi` table"),
    ("list-a100-80gb-pcie-mig-2x3g40gb-lxc-r530.txt", {}, "the memory of MIG devices [0, 1]", "`nvidia-smi` table"),
    ("list-a100-sxm4-80gb-x4-mig-on-gpu0.txt", {}, "GPUs [0] have MIG enabled and GPUs [1, 2, 3] do not",
     "gpus: [1, 2, 3]"),
    ("collect_env-a100-sxm4-80gb-mig-2x3g40gb-cut.txt", {}, "the UUIDs of MIG devices [0, 1]", "nvidia-smi -L"),
    ("list-h100-x2-mig-2g20gb-1g10gb-on-gpu0-r580.txt", {"gpus": [0]}, "a profile's name is not its memory",
     "`nvidia-smi` table"),
    ("table-rtx-pro-6000-x3-mig-on-gpu2-cut.txt", {"gpus": [2]}, "has MIG enabled and the facts show no MIG device",
     "nvidia-smi mig -cgi"),
])
def test_every_recorded_mig_report_is_refused_rather_than_planned_whole(name, variables, said, hint):
    err = plan_or_refusal(read(name).gpus, variables)
    assert isinstance(err, ResolveError), f"{name}: planned {[s.cuda_visible_devices for s in err.servers]}"
    assert said in err.message and hint in err.hint, f"{err.message} / {err.hint}"


def test_whole_gpus_beside_a_mig_gpu_still_plan():
    plan = plan_or_refusal(read("list-a100-sxm4-80gb-x4-mig-on-gpu0.txt").gpus, {"gpus": [1, 2, 3]})
    assert not isinstance(plan, ResolveError), plan
    assert [plan.server_env(s)["CUDA_VISIBLE_DEVICES"] for s in plan.servers] == ["1", "2", "3"]


def test_the_cli_shows_each_mig_device(tmp_path: Path):
    from gpunode.cli.facts import render_facts

    text = render_facts(facts_of(assembled_a100_x2_mig()))
    assert "  mig 0     2g.10gb, 9856 MiB, MIG-00000000-0000-5000-8000-000000000000" in text


def test_the_rendered_units_are_one_per_mig_device_each_reading_its_uuid_from_its_env_file():
    """What lands on the node: a unit per MIG device, its EnvironmentFile giving CUDA_VISIBLE_DEVICES the
    device's MIG UUID (read as systemd reads it), no unit for the whole GPU, no tensor parallelism."""
    from gpunode import roles, variables
    from gpunode.roles.context import RoleContext
    from gpunode.steps.files import File, Template
    from tests.unit import systemd_parse

    v = {**roles.defaults(), "gpus": [0]}
    variables.check(v)
    facts = facts_of(assembled_a100_x2_mig())
    ctx = RoleContext(target="mig-box", vars=v, facts=facts, plan=resolve(facts, v))
    found = {s.id: s for p in roles.module("servers").build(ctx) for s in p.steps}
    units = sorted(k for k in found if k.startswith("file:/etc/systemd/system/gpunode-gpu"))
    assert units == [f"file:/etc/systemd/system/gpunode-gpu0-mig{i}.service" for i in range(4)]
    for i in range(4):
        unit = found[f"file:/etc/systemd/system/gpunode-gpu0-mig{i}.service"]
        assert isinstance(unit, Template)
        settings = systemd_parse.settings(unit.content)
        env_files = [v for _, k, v in settings if k == "EnvironmentFile"]
        assert f"/etc/gpunode/gpu0-mig{i}.env" in env_files
        assert [v for _, k, v in settings if k == "Description"] == [
            f"gpunode sglang server gpu0-mig{i} (GPU 0 MIG-0000000{i}-0000-5000-8000-000000000000)"]
        env = found[f"file:/etc/gpunode/gpu0-mig{i}.env"]
        assert isinstance(env, File)
        assert systemd_parse.env_file(env.content)["CUDA_VISIBLE_DEVICES"] == \
            f"MIG-0000000{i}-0000-5000-8000-000000000000"
        argv = systemd_parse.exec_words(next(v for _, k, v in settings if k == "ExecStart"))
        assert "--tp-size" not in argv and argv[argv.index("--port") + 1] == str(ctx.plan.servers[i].port)
    assert len({s.port for s in ctx.plan.servers}) == 4


def test_vllm_is_refused_on_a_mig_device_it_cannot_start_on():
    # vLLM 0.20.1 int()s CUDA_VISIBLE_DEVICES and exits on a MIG UUID (vllm issue 41848, on the H100 of
    # list-h100-x2-mig-2g20gb-1g10gb-on-gpu0-r580.txt); SGLang and vLLM on the whole GPU still plan
    err = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [0], "engine": "vllm"})
    assert isinstance(err, ResolveError) and err.message.startswith("vLLM 0.20.1 cannot start on a MIG device")
    assert "vllm-project/vllm/issues/41848" in err.evidence and "engine unset" in err.hint
    whole = plan_or_refusal(assembled_a100_x2_mig(), {"gpus": [1], "engine": "vllm"})
    assert [s.cuda_visible_devices for s in whole.servers] == ["1"]


def assembled_check_env_of_mig_devices() -> str:
    """ASSEMBLED, not recorded: the recorded check_env-a100-x8.txt with its GPU line in the form CUDA names a
    MIG device ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", torch.cuda.get_device_name; docs/sources.md#mig): no
    check_env run on MIG devices was found in public threads."""
    text = (REPORTS / "check_env-a100-x8.txt").read_text()
    return text.replace("GPU 0,1,2,3,4,5,6,7: NVIDIA A100-SXM4-80GB",
                        "GPU 0,1,2,3,4,5,6,7: NVIDIA H100 80GB HBM3 MIG 1g.10gb").replace(
                        "GPU 0,1,2,3,4,5,6,7 Compute Capability: 8.0", "GPU 0,1,2,3,4,5,6,7 Compute Capability: 9.0")


def test_check_env_of_mig_devices_is_never_planned_as_whole_gpus():
    r = gpu_report.read_report(assembled_check_env_of_mig_devices())
    assert len(r.gpus) == 8
    assert all(g.name == "NVIDIA H100 80GB HBM3" and g.mig_mode == "Enabled" for g in r.gpus)
    assert [d.profile for g in r.gpus for d in g.mig_devices] == ["1g.10gb"] * 8
    err = plan_or_refusal(r.gpus)
    assert isinstance(err, ResolveError), [s.cuda_visible_devices for s in err.servers]
    assert "the UUIDs of MIG devices [0] are not in the facts" in err.message and "nvidia-smi -L" in err.hint
