"""nvidia-smi parsers on recorded outputs of real machines (tests/data/nvidia-smi/README.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpunode.facts import gpu

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"


def shape(name: str):
    folder = DATA / name

    def read(file: str) -> str | None:
        path = folder / file
        return path.read_text() if path.exists() else None

    return gpu.gpus_and_driver(read("query-gpu.csv"), read("nvidia-smi.txt"), read("nvidia-smi-q.txt"), None)


# shape, GPU count, names, memory MiB per GPU, compute capabilities, driver, CUDA, MIG modes
CASES = [
    ("b200-x8", 8, {"NVIDIA B200"}, {183359}, {"10.0"}, "575.57.08", "12.9", {"Disabled"}),
    ("h100-x8", 8, {"NVIDIA H100 80GB HBM3"}, {81559}, {"9.0"}, "550.90.07", "12.4", {"Disabled"}),
    ("h200-x1", 1, {"NVIDIA H200"}, {143771}, {"9.0"}, "580.159.04", "13.0", {"Disabled"}),
    ("a100-sxm4-e-process", 2, {"NVIDIA A100-SXM4-40GB"}, {40960}, {"8.0"}, "580.126.09", "13.0", {"Disabled"}),
    ("a100-x2-mig", 2, {"NVIDIA A100-PCIE-40GB"}, {40960}, {"8.0"}, "535.129.03", "12.2", {"Enabled", "Disabled"}),
    ("a10-x1", 1, {"NVIDIA A10"}, {23028}, {"8.6"}, "550.127.05", "12.4", {""}),
    ("l4-x1", 1, {"NVIDIA L4"}, {23034}, {"8.9"}, "570.133.20", "12.8", {""}),
    ("gb10-x1", 1, {"NVIDIA GB10"}, {None}, {"12.1"}, "580.126.09", "13.0", {""}),
    ("rtx-5090-x2-r610", 2, {"NVIDIA GeForce RTX 5090"}, {32607}, {"12.0"}, "610.57.04", "13.3", {""}),
    ("rtx-3080-r610", 1, {"NVIDIA GeForce RTX 3080 ..."}, {16384}, {"8.6"}, "610.43.03", "13.3", {""}),
    ("mixed-5090-4090", 2, {"NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 4090"}, {32607, 24564},
     {"12.0", "8.9"}, "580.82.09", "13.0", {""}),
    ("rtx-5070-cuda-na", 1, {"NVIDIA GeForce RTX 5070"}, {12227}, {"12.0"}, "575.64.03", None, {""}),
    ("h100-nvl-cuda-not-found", 1, {"NVIDIA H100 NVL"}, {None}, {"9.0"}, "595.71.03", None, {""}),
    ("rtx-pro-6000-x6-editions", 6, {"NVIDIA RTX PRO 6000 Blac..."}, {97887}, {"12.0"}, "590.48.01", "13.1",
     {"Disabled", ""}),
    ("rtx-pro-6000-x8", 8, {"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"}, {97887}, {"12.0"},
     "590.48.01", "13.1", {""}),
    ("laptop-r470-truncated-name", 1, {"NVIDIA GeForce ..."}, {16116}, {None}, "470.63.01", "11.4", {""}),
    ("gtx-980-r387", 1, {"GeForce GTX 980"}, {4036}, {None}, "387.12", None, {""}),
]


def test_at_least_ten_real_shapes_are_covered():
    recorded = {d.name for d in DATA.iterdir() if d.is_dir()} - {"rtx-pro-6000-x8"}
    assert len(recorded) >= 10
    assert recorded | {"rtx-pro-6000-x8"} == {c[0] for c in CASES}, "every recorded shape has a case"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_recorded_shape_parses(case):
    name, count, names, memory, ccs, driver, cuda, migs = case
    gpus, drv, problems = shape(name)
    assert [g.index for g in gpus] == list(range(count))
    assert {g.name for g in gpus} == names
    assert {g.memory_mib for g in gpus} == memory
    assert {g.compute_cap for g in gpus} == ccs
    assert {g.mig_mode for g in gpus} == migs
    assert (drv.version, drv.cuda) == (driver, cuda)
    assert len({g.pci_bus_id for g in gpus}) == count, "every GPU has its own bus id"
    if None in ccs:
        assert any("compute capability unknown" in p for p in problems)


def test_mig_enabled_only_on_the_gpu_that_has_it():
    gpus, _, _ = shape("a100-x2-mig")
    assert [(g.pci_bus_id, g.mig_mode) for g in gpus] == [("00000000:21:00.0", "Enabled"),
                                                          ("00000000:81:00.0", "Disabled")]


def test_mig_device_rows_are_not_taken_for_gpus():
    # The MIG table lists 4 instances of 9856 MiB; none may appear as a GPU.
    gpus, _, _ = shape("a100-x2-mig")
    assert all(g.memory_mib == 40960 for g in gpus) and len(gpus) == 2


def test_truncated_table_names_match_the_full_names_nvidia_smi_reports():
    gpus, _, _ = shape("rtx-pro-6000-x6-editions")
    full = [row for row in csv.reader((DATA / "rtx-pro-6000-x6-editions" / "query-index-name.csv").open(),
                                      skipinitialspace=True)]
    assert [int(i) for i, _ in full] == [g.index for g in gpus]
    for g, (_, name) in zip(gpus, full, strict=True):
        assert name.startswith(g.name.removesuffix("..."))
        assert gpu.compute_cap_from_name(name)[0] == g.compute_cap == "12.0"


def test_query_is_preferred_and_compute_capability_comes_from_nvidia_smi_there():
    gpus, _, _ = shape("h200-x1")
    assert gpus[0].compute_cap_source == "nvidia-smi"
    assert gpus[0].uuid.startswith("GPU-")
    table_only = gpu.parse_table((DATA / "h200-x1" / "nvidia-smi.txt").read_text())
    assert table_only.gpus[0].compute_cap is None, "the table itself has no compute capability"


def test_table_and_q_of_one_machine_agree():
    for name in ("h200-x1", "a10-x1"):
        table = gpu.parse_table((DATA / name / "nvidia-smi.txt").read_text())
        q = gpu.parse_q((DATA / name / "nvidia-smi-q.txt").read_text())
        assert (table.driver, table.cuda) == (q.driver, q.cuda)
        assert [(g.name, g.memory_mib, g.pci_bus_id, g.mig_mode) for g in table.gpus] == \
               [(g.name, g.memory_mib, g.pci_bus_id, g.mig_mode) for g in q.gpus]


def test_q_fills_the_uuid_the_table_lacks():
    folder = DATA / "a10-x1"
    gpus, _, _ = gpu.gpus_and_driver(None, (folder / "nvidia-smi.txt").read_text(),
                                     (folder / "nvidia-smi-q.txt").read_text(), None)
    assert gpus[0].uuid == "GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d"


@pytest.mark.parametrize("name, cc", [
    ("NVIDIA L40S", "8.9"), ("NVIDIA L4", "8.9"), ("NVIDIA L40", "8.9"),
    ("NVIDIA A10", "8.6"), ("NVIDIA A100 80GB PCIe", "8.0"), ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA H20", "9.0"), ("NVIDIA H200 NVL", "9.0"), ("NVIDIA GH200 480GB", "9.0"),
    ("NVIDIA B200", "10.0"), ("NVIDIA GB200", "10.0"), ("NVIDIA B300 SXM6 AC", "10.3"), ("NVIDIA GB10", "12.1"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("Quadro RTX 6000", "7.5"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"), ("NVIDIA RTX PRO 6000 Blac...", "12.0"),
    ("NVIDIA GeForce RTX 5070 Ti", "12.0"), ("NVIDIA GeForce RTX 4090 D", "8.9"), ("Tesla V100-SXM2-16GB", "7.0"),
])
def test_compute_capability_from_product_name(name, cc):
    got, source = gpu.compute_cap_from_name(name)
    assert got == cc
    assert "developer.nvidia.com/cuda-gpus" in source


@pytest.mark.parametrize("name", ["NVIDIA GeForce ...", "NVIDIA RTX ...", "Some Future GPU", "GRID V100D-8C"])
def test_unknown_or_ambiguous_names_give_no_compute_capability(name):
    assert gpu.compute_cap_from_name(name) == (None, "")


def test_driver_failure_message_is_kept_as_a_problem():
    # Verbatim message of nvidia-smi without a working driver, as quoted in
    # https://github.com/fenghan0430/How-to-use-vGPU/issues/5
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n")
    gpus, drv, problems = gpu.gpus_and_driver(None, text, None, None)
    assert gpus == () and drv.version is None
    assert problems == [f"no GPU found (table: {text.strip()})"]


def test_kernel_module_version_wins_and_a_mismatch_is_reported():
    proc = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
            "GCC version:  gcc version 15.3.0 (GCC) \n")
    assert gpu.parse_proc_version(proc) == "580.159.04"
    table = (DATA / "h100-x8" / "nvidia-smi.txt").read_text()       # says 550.90.07
    _, drv, problems = gpu.gpus_and_driver(None, table, None, proc)
    assert drv.version == "580.159.04"
    assert problems == ["nvidia-smi reports driver 550.90.07 but the kernel module is 580.159.04"]


def test_cut_off_pastes_still_give_every_complete_gpu_row():
    text = (DATA / "b200-x8" / "nvidia-smi.txt").read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[: lines.index(next(line for line in lines if line.startswith("|   3  "))) + 1])
    view = gpu.parse_table(cut)
    assert [g.index for g in view.gpus] == [0, 1, 2, 3]
    assert view.gpus[3].memory_mib is None, "GPU 3's memory line was cut off"
