"""The probe's recording from a real H200 (tests/data/snapshots/h200/README.md): the parsed
facts must agree with what nvidia-smi's table and -q, torch, and the plain-sh run of the
same probe on the same machine say."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpunode.facts import gpu
from gpunode.facts.parse import parse
from gpunode.facts.probe import split
from gpunode.facts.snapshot import RawFacts, load

DATA = Path(__file__).resolve().parents[1] / "data"
SNAP = DATA / "snapshots" / "h200"
SHAPE = DATA / "nvidia-smi" / "h200-x1"

FACTS = parse(load(SNAP))


def test_gpus_match_nvidia_smi_table_and_q_of_the_same_machine():
    table = gpu.parse_table((SHAPE / "nvidia-smi.txt").read_text())
    q = gpu.parse_q((SHAPE / "nvidia-smi-q.txt").read_text())
    for view in (table, q):
        assert [(g.index, g.name, g.memory_mib, g.pci_bus_id, g.mig_mode) for g in view.gpus] == \
               [(g.index, g.name, g.memory_mib, g.pci_bus_id, g.mig_mode) for g in FACTS.gpus]
        assert (view.driver, view.cuda) == (FACTS.driver.version, FACTS.driver.cuda)
    assert [g.uuid for g in q.gpus] == [g.uuid for g in FACTS.gpus]


def test_gpus_match_what_torch_saw_there():
    # "2.11.0+cu130 13.0 NVIDIA H200 (9, 0) 150109880320"
    line = (SNAP / "device" / "torch.txt").read_text().strip()
    m = re.fullmatch(r"(\S+) (\S+) (.+) (\(\d+, \d+\)) (\d+)", line)
    assert m, line
    torch_version, torch_cuda, name, cap, total = m.groups()
    major, minor = ast.literal_eval(cap)
    (g,) = FACTS.gpus
    assert g.name == name and g.compute_cap == f"{major}.{minor}"
    # torch counts bytes the driver lets it use; nvidia-smi's total is a little larger
    assert 0.95 < int(total) / (g.memory_mib * 2**20) <= 1.0
    assert FACTS.install.torch == torch_version.split("+")[0]
    assert FACTS.install.torch_cuda == torch_cuda


def test_driver_user_space_matches_the_kernel_module():
    assert FACTS.driver.version == "580.159.04"
    assert FACTS.system.libcuda and FACTS.system.libcuda_version == FACTS.driver.version
    assert FACTS.problems == ()


def test_system_facts_of_the_machine():
    s = FACTS.system
    assert (s.os_id, s.os_version, s.arch, s.glibc) == ("ubuntu", "24.04", "x86_64", "2.39")
    assert s.cpus == 16                               # the device README: 16 CPU cores
    assert s.mem_limit_bytes == 128 * 2**30           # and 128 GiB memory (cgroup v2 memory.max)
    assert s.default_python == "3.12" and "3.12" in s.pythons
    assert [(t.path, t.version, t.kind) for t in s.toolkits] == [("/usr/local/cuda-13.0", "13.0", "system")]
    assert s.libnuma and s.in_container and not s.systemd


def test_plain_sh_run_of_the_probe_gives_the_same_facts():
    out = (SNAP / "device" / "probe-sh.out").read_text()
    sections = split(out, "gpunodeh200")
    assert set(sections) == set(load(SNAP).sections)
    sh = parse(RawFacts(target="h200", sections=sections, venv="/opt/torch/.venv"))
    assert sh.gpus == FACTS.gpus and sh.driver == FACTS.driver and sh.install == FACTS.install
    # free space moved between the two runs (pip unpacked wheels in between); the rest is equal
    assert (sh.system.toolkits, sh.system.glibc, sh.system.cpus, sh.system.mem_limit_bytes) == \
           (FACTS.system.toolkits, FACTS.system.glibc, FACTS.system.cpus, FACTS.system.mem_limit_bytes)


def test_the_recorded_query_is_the_one_gpunode_asks_for():
    assert (SHAPE / "query-gpu.args").read_text().split("\n")[:2] == list(gpu.QUERY_ARGS)
    assert (SHAPE / "query-gpu.csv").read_text() == (SNAP / "nvidia_query.txt").read_text()
