"""Pasted GPU reports other than the nvidia-smi table and -q, on recorded real outputs
(tests/data/gpu-reports/README.md says where each came from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpunode.facts import gpu_report
from tests.unit.test_resolve_cli import gpunode

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu-reports"


def read(name: str) -> gpu_report.Report:
    return gpu_report.read_report((DATA / name).read_text())


# file, format, GPU count, names, compute capabilities, driver, driver's CUDA
CASES = [
    ("xml-rtx3090-r555.xml", gpu_report.XML, 1, {"NVIDIA GeForce RTX 3090"}, {"8.6"}, "555.42.06", "12.5"),
    ("xml-geforce410m-r390.xml", gpu_report.XML, 1, {"GeForce 410M"}, {None}, "390.157", None),
    ("check_env-a100-x8.txt", gpu_report.CHECK_ENV, 8, {"NVIDIA A100-SXM4-80GB"}, {"8.0"}, "550.90.07", None),
    ("check_env-a40-x1.txt", gpu_report.CHECK_ENV, 1, {"NVIDIA A40"}, {"8.6"}, "535.104.12", None),
    ("check_env-quadro-rtx6000-x8.txt", gpu_report.CHECK_ENV, 8, {"Quadro RTX 6000"}, {"7.5"}, "550.67", None),
    ("collect_env-h100-x8.txt", gpu_report.COLLECT_ENV, 8, {"NVIDIA H100 80GB HBM3"}, {"9.0"}, "550.127.05", None),
    ("collect_env-rtx4070-laptop-wsl.txt", gpu_report.COLLECT_ENV, 1, {"NVIDIA GeForce RTX 4070 Laptop GPU"},
     {"8.9"}, "551.88", None),
    ("collect_env-h100-x1-vllm-sections.txt", gpu_report.COLLECT_ENV, 1, {"NVIDIA H100 80GB HBM3"}, {"9.0"},
     "580.105.08", None),
    ("list-quadro-rtx4000-x2.txt", gpu_report.LIST, 2, {"Quadro RTX 4000"}, {"7.5"}, None, None),
    ("list-rtx4070-laptop-wsl.txt", gpu_report.LIST, 1, {"NVIDIA GeForce RTX 4070 Laptop GPU"}, {"8.9"}, None, None),
]


def test_every_recorded_report_has_a_case():
    from tests.unit.test_facts_mig import MIG_FILES  # MIG reports, read and planned there
    from tests.unit.test_gpu_reports_issue38 import NAMES as NAMES38  # issue 38's reports, resolved there
    from tests.unit.test_gpu_reports_unseen import NAMES  # issue 28's reports, resolved there

    refused = {"q-memory-rtx2080-cut.txt", "q-memory-tail5.txt"}
    listed = {c[0] for c in CASES} | refused | NAMES | MIG_FILES | NAMES38
    assert {p.name for p in DATA.iterdir() if p.name != "README.md"} == listed


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_recorded_report_parses(case):
    name, fmt, count, names, ccs, driver, cuda = case
    r = read(name)
    assert r.format == fmt
    assert [g.index for g in r.gpus] == list(range(count))
    assert {g.name for g in r.gpus} == names
    assert {g.compute_cap for g in r.gpus} == ccs
    assert (r.driver.version, r.driver.cuda) == (driver, cuda)
    if cuda is None:
        assert any("does not show the CUDA version" in p for p in r.problems)


def test_check_env_carries_its_own_compute_capability_and_the_software():
    r = read("check_env-quadro-rtx6000-x8.txt")
    assert {g.compute_cap_source for g in r.gpus} == {"sglang.check_env"}
    assert r.reported is not None
    assert (r.reported.torch, r.reported.torch_cuda, r.reported.nvcc) == ("2.7.1+cu126", "12.6", "12.4")
    assert (r.reported.sglang, r.reported.sgl_kernel, r.reported.flashinfer) == ("0.4.9", "0.2.4", "0.2.7.post1")


def test_collect_env_torch_cuda_wsl_and_could_not_collect():
    wsl = read("collect_env-rtx4070-laptop-wsl.txt").reported
    assert wsl is not None and (wsl.torch, wsl.torch_cuda, wsl.cuda_runtime, wsl.wsl) == (
        "2.4.0+cu121", "12.1", "12.4.131", True)
    h100 = read("collect_env-h100-x8.txt")
    assert h100.reported is not None and h100.reported.cuda_runtime is None  # "Could not collect"
    assert all(g.compute_cap_source.startswith("product table") for g in h100.gpus)


def test_xml_keeps_bus_id_and_uuid_although_the_paste_is_cut():
    (g,) = read("xml-rtx3090-r555.xml").gpus
    assert (g.pci_bus_id, g.uuid, g.memory_mib, g.mig_mode) == (
        "00000000:C1:00.0", "GPU-8957c40c-ccda-23ec-9b28-f0ec12f25f2a", None, "")


@pytest.mark.parametrize("name", ["q-memory-rtx2080-cut.txt", "q-memory-tail5.txt"])
def test_memory_only_report_is_refused_naming_format_and_fix(name):
    r = read(name)
    assert r.format == gpu_report.Q_MEMORY and r.gpus == ()
    message, hint = gpu_report.refusal(name, r)
    assert len((message + "\n" + hint).splitlines()) <= 5
    assert "nvidia-smi -q -d MEMORY" in message and "no GPU names" in message and "nvidia-smi -q" in hint


def test_query_csv_without_index_column_is_numbered_in_row_order():
    # The header and rows of the recorded H200 query, without its index column.
    rows = [line.split(", ", 1)[1] for line in (DATA.parent / "nvidia-smi" / "h200-x1" / "query-gpu.csv")
            .read_text().splitlines() if line.strip()]
    r = gpu_report.read_report("\n".join(rows) + "\n")
    assert r.format == gpu_report.QUERY
    assert [(g.index, g.name, g.compute_cap) for g in r.gpus] == [(0, "NVIDIA H200", "9.0")]


def test_noheader_csv_is_refused_saying_the_header_is_missing():
    text = (DATA.parent / "nvidia-smi" / "rtx-pro-6000-x6-editions" / "query-index-name.csv").read_text()
    r = gpu_report.read_report(text)
    message, hint = gpu_report.refusal("q.csv", r)
    assert r.format == gpu_report.QUERY and not r.gpus
    assert "header row" in message and "--format=csv" in hint


# -- through the CLI ------------------------------------------------------------------


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "Qwen3-0.6B"
    d.mkdir()
    # the real config (tests/data/models/qwen3-0.6b/SOURCE): without its shapes the size is unknown and refused
    (d / "config.json").write_text((DATA.parent / "models" / "qwen3-0.6b" / "config.json").read_text())
    return d


def test_resolve_plans_from_collect_env_on_a_580_driver(model_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(DATA / "collect_env-h100-x1-vllm-sections.txt"),
                  "--model", str(model_dir), "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["topology"]["servers"] == 1 and plan["pinset"].startswith("cu13")


# file, driver, compute capability: what the plan or the resolver's refusal must be about
READ = [("xml-rtx3090-r555.xml", "555.42.06", "8.6"), ("check_env-a100-x8.txt", "550.90.07", "8.0"),
        ("check_env-quadro-rtx6000-x8.txt", "550.67", "7.5"), ("collect_env-h100-x8.txt", "550.127.05", "9.0")]


@pytest.mark.parametrize("name, driver, cc", READ, ids=[r[0] for r in READ])
def test_resolve_reads_the_pasted_report(name, driver, cc, model_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(DATA / name), "--model", str(model_dir), "--explain")
    assert "Traceback" not in out.stderr and "no GPU" not in out.stderr, out.stderr
    if out.returncode == 0:  # the resolver's driver floors allow it: the plan cites what was read
        assert driver in out.stdout and cc in out.stdout, out.stdout
    else:  # a resolver rule refused, about the facts read from the file
        assert out.returncode == 2 and (driver in out.stderr or f"compute capability {cc}" in out.stderr), out.stderr


def test_resolve_refuses_a_memory_only_report_in_five_lines(tmp_path):
    src = DATA / "q-memory-rtx2080-cut.txt"
    shutil.copy(src, tmp_path / "smi.txt")
    out = gpunode("resolve", "--nvidia-smi", str(tmp_path / "smi.txt"), "--model", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) <= 5, out.stderr
    assert "nvidia-smi -q -d MEMORY" in out.stderr and "nvidia-smi -q" in out.stderr
    assert "7331 MiB" not in out.stderr, "the file is not echoed"
