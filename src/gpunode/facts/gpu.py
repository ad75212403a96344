"""GPUs and the driver, from nvidia-smi: the CSV query gpunode asks for, and the
two forms people paste into bug reports, the default table and `nvidia-smi -q`.

Each parser is pure and returns what its text shows; `gpus_and_driver` picks
the best source. Formats handled (see tests/data/nvidia-smi/README.md for the
recorded outputs): the pre-R450 two-line table, the R450-R570 table, the
R575+ table, the R610 header ("KMD Version" / "CUDA UMD Version"), names
truncated with "...", memory "Not Supported" (GB10) or "N/A" (MIG inside a
container), MIG device tables (read by facts/mig.py, with `-L` for their UUIDs),
process tables, "CUDA Version: N/A" and "Not Found".
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass, replace
from importlib import resources

from gpunode import yamlsrc
from gpunode.errors import FactError
from gpunode.facts import mig
from gpunode.facts.cache import Group
from gpunode.facts.cuda import LIB_SCAN
from gpunode.facts.snippet import Snippet
from gpunode.facts.types import Driver, Gpu

#: nvidia-smi arguments of the CSV query. The lab's stand-in nvidia-smi answers
#: exactly these (tests/data/nvidia-smi/<shape>/query-gpu.args, one per line).
QUERY_FIELDS = ("index", "name", "memory.total", "compute_cap", "pci.bus_id", "mig.mode.current",
                "uuid", "driver_version")
QUERY_ARGS = (f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,nounits")

# nvidia-smi's inventory (GPUs, names, memory size, driver and CUDA versions) changes with the
# loaded module (its version line, read fresh), the device nodes, nvidia-smi and the driver's
# libraries, or a restart of the container (GPUs are passed through at its start: PID 1's start
# time and the boot id). Usage figures in the table are not facts gpunode reads.
NVIDIA = Group("nvidia", ("/dev/nvidia*", '"$gn_smi"', "$gn_libs"), setup=(LIB_SCAN, r"""gn_smi=; set -f; IFS=:
for dir in $PATH; do if [ -f "$dir/nvidia-smi" ] && [ -x "$dir/nvidia-smi" ]; then gn_smi=$dir/nvidia-smi; break; fi
done; unset IFS
gn_nvrm=; [ -r /proc/driver/nvidia/version ] && read -r gn_nvrm </proc/driver/nvidia/version
gn_boot=; [ -r /proc/sys/kernel/random/boot_id ] && read -r gn_boot </proc/sys/kernel/random/boot_id
gn_pid1=; [ -r /proc/1/stat ] && read -r gn_pid1 </proc/1/stat; gn_pid1=${gn_pid1##*) }
set -- $gn_pid1; gn_pid1=${20:-}; set +f"""),
    fresh='nvrm=$gn_nvrm boot=$gn_boot pid1=$gn_pid1')

SNIPPETS = (
    Snippet("nvidia_query", "t nvidia-smi " + " ".join(QUERY_ARGS), cached=NVIDIA),
    Snippet("nvidia_smi", "t nvidia-smi", cached=NVIDIA),
    # -q is slow on 8 GPUs and only needed when the query is refused (drivers
    # before 510 lack compute_cap; stand-ins may not know the query).
    Snippet("nvidia_smi_q", "t nvidia-smi -q",
            when='[ "$rc_nvidia_query" != 0 ] && command -v nvidia-smi >/dev/null 2>&1', cached=NVIDIA),
    # the MIG devices' UUIDs (CUDA_VISIBLE_DEVICES=MIG-...) and profiles: only -L prints them
    Snippet("nvidia_smi_list", "t nvidia-smi -L", when="command -v nvidia-smi >/dev/null 2>&1", cached=NVIDIA),
    Snippet("driver_proc", "while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done "
                           "</proc/driver/nvidia/version", inline=True),
)

_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)*")


@dataclass(frozen=True)
class SmiView:
    """What one nvidia-smi output says; None where it says nothing."""

    driver: str | None = None
    cuda: str | None = None
    gpus: tuple[Gpu, ...] = ()
    error: str | None = None          # nvidia-smi's own failure message


def _version(text: str | None) -> str | None:
    """'13.0' from '13.0'; None from 'N/A', 'Not Found', 'ERR!'."""
    if not text:
        return None
    m = _VERSION.match(text.strip())
    return m.group(0) if m else None


def _na(text: str | None) -> str | None:
    text = (text or "").strip()
    return None if not text or text.strip("[]") in ("N/A", "Not Supported", "Unknown Error") else text.strip("[]")


# -- compute capability from the product name ----------------------------------


@functools.cache
def _cc_table() -> tuple[str, dict[str, str]]:
    data = yamlsrc.table(resources.files("gpunode.facts").joinpath("data/compute_caps.yml").read_text())
    return data["source"], {name: row["cc"] for name, row in data["products"].items()}


def _short_name(name: str) -> str:
    name = name.strip()
    for prefix in ("NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _key_matches(key: str, name: str) -> bool:
    """key is a prefix of name ending on a word boundary ("L4" is not a prefix of "L40S")."""
    return name.startswith(key) and (len(name) == len(key) or not name[len(key)].isalnum())


def compute_cap_from_name(name: str) -> tuple[str | None, str]:
    """(compute capability, source) from a product name, possibly truncated with '...'."""
    source, table = _cc_table()
    short = _short_name(name)
    truncated = short.endswith("...")
    if truncated:
        stem = short[:-3].rstrip()
        ccs = {cc for key, cc in table.items() if key.startswith(stem) or _key_matches(key, stem)}
        # A cut-off name only counts when every product it could be agrees.
        return (ccs.pop(), f"product table ({source})") if len(ccs) == 1 else (None, "")
    keys = [key for key in table if _key_matches(key, short)]
    if not keys:
        return None, ""
    return table[max(keys, key=len)], f"product table ({source})"


def with_compute_cap(gpu: Gpu) -> Gpu:
    if gpu.compute_cap:
        return gpu
    cc, source = compute_cap_from_name(gpu.name)
    return replace(gpu, compute_cap=cc, compute_cap_source=source) if cc else gpu


# -- the CSV query ---------------------------------------------------------------


def parse_query(text: str) -> SmiView:
    """`nvidia-smi --query-gpu=... --format=csv[,nounits]` with its header row."""
    try:
        rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    except csv.Error:  # a field past csv's 128 KiB limit: no query nvidia-smi prints
        rows = []
    if not rows or "index" not in [_field(h) for h in rows[0]]:
        return SmiView(error=text.strip() or "empty output")
    header = [_field(h) for h in rows[0]]
    gpus: list[Gpu] = []
    drivers: set[str] = set()
    if len(rows) - 1 > MAX_GPUS:
        raise _impossible(f"it lists {len(rows) - 1} GPUs; no node has more than {MAX_GPUS}")
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        v = dict(zip(header, (c.strip() for c in row), strict=True))
        if (v.get("index") or "").startswith("-") or (v.get("memory.total") or "").startswith("-"):
            raise _impossible(f"GPU index {v.get('index')} has memory {v.get('memory.total')}: a negative number")
        if not (v.get("index") or "").isdigit():
            continue
        if any(g.index == int(v["index"]) for g in gpus):
            raise _impossible(f"it lists GPU index {v['index']} twice")
        cc = _na(v.get("compute_cap"))
        gpus.append(Gpu(
            index=int(v["index"]),
            name=v.get("name", ""),
            memory_mib=_mib(v.get("memory.total")),
            compute_cap=cc,
            compute_cap_source="nvidia-smi" if cc else "",
            pci_bus_id=v.get("pci.bus_id", ""),
            mig_mode=_na(v.get("mig.mode.current")) or "",
            uuid=_na(v.get("uuid")) or "",
        ))
        driver = _version(v.get("driver_version"))
        if driver:
            drivers.add(driver)
    return SmiView(driver=min(drivers) if drivers else None, gpus=tuple(gpus))


MAX_GPUS = 1024


def _impossible(what: str) -> FactError:
    return FactError(f"nvidia_query (nvidia-smi --query-gpu): {what}",
                     hint="no driver prints that: check the snapshot or report file, or run "
                          "`nvidia-smi --query-gpu=index,name,memory.total --format=csv` on the node")


def _field(header: str) -> str:
    return header.split("[")[0].strip()          # "memory.total [MiB]" -> "memory.total"


def _mib(text: str | None) -> int | None:
    m = re.match(r"\s*(\d+)(?:\s*MiB)?\s*$", text or "")
    return int(m.group(1)) if m else None


# -- the default table -------------------------------------------------------------

_HEADER_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)")
_HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*([^|]*?)\s*(?:\||$)")
_GPU_ROW = re.compile(
    rf"^\|\s*(?P<index>\d+)\s+(?P<name>.*?)\s+(?P<persist>On|Off|WDDM|TCC|MCDM|N/A)\s*\|"
    rf"\s*(?P<bus>{_BUS})\s+\S+\s*\|"
)
_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def parse_table(text: str) -> SmiView:
    """The default `nvidia-smi` output."""
    driver = cuda = None
    for line in text.splitlines():
        if "NVIDIA-SMI" in line and ("Version:" in line):
            m = _HEADER_DRIVER.search(line)
            driver = _version(m.group(1)) if m else None
            c = _HEADER_CUDA.search(line)
            cuda = _version(c.group(1)) if c else None
            break
    lines = text.splitlines()
    gpus = []
    devices = mig.from_table(text)
    for i, line in enumerate(lines):
        m = _GPU_ROW.match(line.strip())
        if not m:
            continue
        follow = _block_lines(lines, i + 1)
        memory = None
        mode = ""
        if follow:
            cells = _cells(follow[0])
            mem = _MEMORY.search(cells[1]) if len(cells) > 1 else None
            memory = int(mem.group(2)) if mem else None
        if len(follow) > 1:
            cells = _cells(follow[1])
            mode = _na(cells[-1]) or "" if cells else ""
        gpus.append(Gpu(index=int(m["index"]), name=m["name"].strip(), memory_mib=memory,
                        compute_cap=None, pci_bus_id=m["bus"], mig_mode=mode,
                        mig_devices=devices.get(int(m["index"]), ())))
    error = None if gpus or driver else (text.strip().splitlines() or ["empty output"])[0]
    return SmiView(driver=driver, cuda=cuda, gpus=tuple(gpus), error=error)


def _block_lines(lines: list[str], start: int) -> list[str]:
    """The '|' lines that continue a GPU row, up to the next border."""
    out = []
    for line in lines[start:start + 2]:
        s = line.strip()
        if not s.startswith("|") or _GPU_ROW.match(s):
            break
        out.append(s)
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


# -- nvidia-smi -q ------------------------------------------------------------------


def parse_q(text: str) -> SmiView:
    """`nvidia-smi -q`: indented 'Key : value' lines, one block per GPU."""
    driver = cuda = None
    gpus: list[Gpu] = []
    current: dict[str, str] | None = None
    path: list[tuple[int, str]] = []
    block: list[str] = []

    def flush() -> None:
        if current is not None:
            gpus.append(Gpu(
                index=len(gpus),
                name=current.get("Product Name", ""),
                memory_mib=_mib(current.get("FB Memory Usage/Total", "").replace(" MiB", "MiB")),
                compute_cap=None,
                pci_bus_id=current["bus"],
                mig_mode=_na(current.get("MIG Mode/Current")) or "",
                uuid=_na(current.get("GPU UUID")) or "",
                mig_devices=mig.from_q_block(block),
            ))

    for raw in text.splitlines():
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(":")
        key, value = key.strip(), value.strip()
        g = re.fullmatch(rf"GPU ({_BUS})", raw.strip())
        if indent == 0 and g:
            flush()
            current, path, block = {"bus": g.group(1)}, [], []
            continue
        if indent == 0 and sep:
            if key in ("Driver Version", "KMD Version") and driver is None:
                driver = _version(value)
            elif key in ("CUDA Version", "CUDA UMD Version") and cuda is None:
                cuda = _version(value)
            continue
        if current is None:
            continue
        block.append(raw)
        while path and path[-1][0] >= indent:
            path.pop()
        full = "/".join([p for _, p in path] + [key])
        if sep and value:
            # First value wins: MIG device blocks nest their own "FB Memory Usage" deeper.
            current.setdefault(full, value)
        else:
            path.append((indent, key))
    flush()
    error = None if gpus or driver else (text.strip().splitlines() or ["empty output"])[0]
    return SmiView(driver=driver, cuda=cuda, gpus=tuple(gpus), error=error)


# -- the kernel module -----------------------------------------------------------------


def parse_proc_version(text: str) -> str | None:
    """/proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX ... Kernel Module  580.65.06  ...'."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", line + " ")
            return m.group(1) if m else None
    return None


# -- putting them together -----------------------------------------------------------------


def gpus_and_driver(query: str | None, table: str | None, q: str | None,
                    proc: str | None, listing: str | None = None) -> tuple[tuple[Gpu, ...], Driver, list[str]]:
    """The GPUs, the driver, and sentences about what could not be read.

    The query is preferred for GPUs (full names, compute capability), the table
    and -q fill in what it lacks (the CUDA version is only in those two), and
    the kernel module's own version wins for the driver, because that is what
    user-space libraries in a container must match.
    """
    views = {name: parse(text) for name, text, parse in
             (("query", query, parse_query), ("table", table, parse_table), ("-q", q, parse_q))
             if text is not None}
    problems = []
    primary = next((views[n] for n in ("query", "table", "-q") if n in views and views[n].gpus), None)
    gpus = primary.gpus if primary else ()
    gpus = _fill_from(gpus, [v for v in views.values() if v is not primary and v.gpus])
    if listing:
        gpus = mig.with_devices(gpus, mig.from_list(listing))
    gpus = tuple(with_compute_cap(g) for g in gpus)
    kernel = parse_proc_version(proc) if proc else None
    smi_driver = next((v.driver for v in views.values() if v.driver), None)
    cuda = next((views[n].cuda for n in ("table", "-q") if n in views and views[n].cuda), None)
    if kernel and smi_driver and kernel != smi_driver:
        problems.append(f"nvidia-smi reports driver {smi_driver} but the kernel module is {kernel}")
    if not gpus:
        errors = [f"{n}: {v.error}" for n, v in views.items() if v.error]
        problems.append("no GPU found" + (f" ({'; '.join(errors)})" if errors else ""))
    for g in gpus:
        if not g.compute_cap:
            problems.append(f"GPU {g.index} ({g.name}): compute capability unknown; add the product "
                            "to gpunode/facts/data/compute_caps.yml")
    return gpus, Driver(version=kernel or smi_driver, cuda=cuda), problems


def _fill_from(gpus: tuple[Gpu, ...], views: list[SmiView]) -> tuple[Gpu, ...]:
    """Complete a table's GPUs with -q's full names, UUIDs and memory (matched by bus id)."""
    by_bus: dict[str, Gpu] = {}
    for v in views:
        for g in v.gpus:
            by_bus.setdefault(g.pci_bus_id.upper(), g)
    out = []
    for g in gpus:
        other = by_bus.get(g.pci_bus_id.upper())
        if other is not None:
            g = replace(
                g,
                name=other.name if g.name.endswith("...") and other.name else g.name,
                uuid=g.uuid or other.uuid,
                memory_mib=g.memory_mib if g.memory_mib is not None else other.memory_mib,
                mig_mode=g.mig_mode or other.mig_mode,
                mig_devices=mig.merge(g.mig_devices, other.mig_devices),
            )
        out.append(g)
    return tuple(out)
