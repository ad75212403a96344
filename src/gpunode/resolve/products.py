"""GPU products by name: memory per GPU and the host's CPU architecture (compat/gpu_products.yml,
NVIDIA's published figures, one source per row)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from gpunode import yamlsrc
from gpunode.facts.gpu import _key_matches, _short_name, compute_cap_from_name

WHERE = "compat/gpu_products.yml"


@dataclass(frozen=True)
class Product:
    key: str
    memory_gb: int
    host: str | None
    unified: bool
    source: str

    @property
    def memory_mib(self) -> int:
        """NVIDIA's decimal GB in MiB, rounded down: at most what nvidia-smi shows for the card."""
        return self.memory_gb * 10**9 // (1 << 20)

    @property
    def cc(self) -> str | None:
        return compute_cap_from_name(self.key)[0]


@functools.cache
def table() -> tuple[Product, ...]:
    data = yamlsrc.table(resources.files("gpunode").joinpath("compat/gpu_products.yml").read_text())
    return tuple(Product(key, row["memory_gb"], row.get("host"), bool(row.get("unified")), row["source"])
                 for key, row in data["products"].items())


def lookup(name: str) -> Product | None:
    """The product a GPU name is (the longest matching key), or None: also for a name cut with '...'."""
    short = _short_name(name)
    if short.endswith("..."):
        return None
    rows = [p for p in table() if _key_matches(p.key, short) and ("Laptop" in p.key) == ("Laptop" in short)]
    return max(rows, key=lambda p: len(p.key)) if rows else None


def smallest(cc: str) -> Product | None:
    """The product of compute capability `cc` with the least memory (unified-memory SoCs left out)."""
    rows = [p for p in table() if p.cc == cc and not p.unified]
    return min(rows, key=lambda p: p.memory_gb) if rows else None
