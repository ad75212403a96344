"""The GPU product table (compat/gpu_products.yml): names as nvidia-smi prints them, the smallest
card of a name unless the name says its memory, and no guess for a cut or laptop name."""

from __future__ import annotations

import pytest

from gpunode.resolve import products


@pytest.mark.parametrize("name, key, gb", [
    ("NVIDIA A10G", "A10G", 24),                        # AWS g5; "A10" must not take it
    ("NVIDIA A10", "A10", 24),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", 80),
    ("NVIDIA A100-PCIE-40GB", "A100", 40),             # no 40 GB row: the bare name is the smaller card
    ("NVIDIA H100 80GB HBM3", "H100", 80),
    ("NVIDIA H100 NVL", "H100 NVL", 94),
    ("NVIDIA GH200 480GB", "GH200", 96),               # "480GB" counts the CPU's memory too
    ("NVIDIA GH200 144G HBM3e", "GH200 144G HBM3e", 144),
    ("NVIDIA H20", "H20", 96),
    ("NVIDIA L4", "L4", 24), ("NVIDIA L40S", "L40S", 48),
    ("Tesla T4", "T4", 16), ("Tesla V100S-PCIE-32GB", "V100S", 32), ("Tesla V100-SXM2-16GB", "V100", 16),
    ("NVIDIA B300 SXM6 AC", "B300", 288), ("NVIDIA Thor", "Thor", 64),
    ("NVIDIA GeForce RTX 4070 Laptop GPU", "GeForce RTX 4070 Laptop GPU", 8),
])
def test_names_as_nvidia_smi_prints_them(name, key, gb):
    p = products.lookup(name)
    assert p is not None and (p.key, p.memory_gb) == (key, gb)
    assert p.source.startswith("https://")


@pytest.mark.parametrize("name", ["NVIDIA B3", "NVIDIA A100-SXM...", "NVIDIA GeForce RTX 4090 Laptop GPU",
                                  "GeForce 410M"])
def test_no_memory_for_a_cut_an_unknown_or_a_laptop_name_without_its_row(name):
    assert products.lookup(name) is None


def test_memory_in_mib_is_below_what_nvidia_smi_shows():
    # nvidia-smi: H100 80GB HBM3 81559 MiB, L4 23034 MiB, A10G 23028 MiB (tests/data/gpu-reports)
    for name, shown in [("NVIDIA H100 80GB HBM3", 81559), ("NVIDIA L4", 23034), ("NVIDIA A10G", 23028)]:
        p = products.lookup(name)
        assert p is not None and p.memory_mib <= shown


def test_host_architecture_only_for_superchips_and_socs():
    hosts = {p.key: p.host for p in products.table() if p.host}
    assert set(hosts) == {"GB10", "Thor", "GB200", "GB300", "GH200", "GH200 144G HBM3e"}
    assert set(hosts.values()) == {"aarch64"}


def test_smallest_card_of_a_compute_capability():
    # laptop parts count: an unknown 8.9 name may be one
    least = products.smallest("8.9")
    assert least is not None and (least.key, least.memory_gb) == ("GeForce RTX 4070 Laptop GPU", 8)
    # unified-memory parts (GB10, Thor) share their memory with the CPU: never the floor
    assert products.smallest("11.0") is None and products.smallest("12.1") is None
