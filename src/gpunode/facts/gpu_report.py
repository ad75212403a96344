"""GPU reports people paste into bug reports, besides the table and `-q`
(those stay in gpu.py): `nvidia-smi -q -x` XML, `nvidia-smi -L`, a cut
`nvidia-smi -q -d MEMORY`, `python -m sglang.check_env` and
`python -m torch.utils.collect_env` (also vLLM's sectioned copy of it).

`read_report` recognises the format, parses what it shows and says, when no
GPU can be read, what is missing and which command gives a usable report.
Pasted text is often cut off mid-element, so the XML is read with patterns,
not with an XML parser that would refuse the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.facts import mig
from gpunode.facts.driver_match import MISMATCH_TEXT
from gpunode.facts.gpu import _BUS, SmiView, _na, _version, gpus_and_driver, parse_query, with_compute_cap
from gpunode.facts.types import Driver, Gpu, Reported

TABLE, Q, QUERY = "nvidia-smi (table)", "nvidia-smi -q", "nvidia-smi --query-gpu CSV"
XML, LIST, Q_MEMORY = "nvidia-smi -q -x (XML)", "nvidia-smi -L", "nvidia-smi -q -d MEMORY"
CHECK_ENV, COLLECT_ENV = "python -m sglang.check_env", "python -m torch.utils.collect_env"
AMD = "an AMD ROCm report"
NVML = "nvidia-smi failing with NVML's driver/library version mismatch"

USABLE = ("`nvidia-smi -q` (or plain `nvidia-smi`), or gpunode's query: nvidia-smi "
          "--query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv")


@dataclass(frozen=True)
class Report:
    format: str | None               # one of the names above; None when nothing was recognised
    gpus: tuple[Gpu, ...]
    driver: Driver
    problems: tuple[str, ...]
    reported: Reported | None = None  # what an environment report says about the software
    missing: str = ""                 # when no GPU could be read: what the file lacks


# What only a report from an AMD GPU says: SGLang's check_env on ROCm ("ROCM available",
# "ROCM Driver Version", "AMD Topology"), torch's collect_env of a ROCm build, rocm-smi's banner.
_AMD = re.compile(r"^[ \t]*ROCM (?:available|Driver Version)\s*:|^AMD Topology:|ROCm System Management Interface|"
                  r"^[ \t]*ROCM used to build PyTorch\s*:\s*\d|^[ \t]*GPU [\d,]+: AMD |GPU models and configuration\s*:"
                  r"\s*AMD ", re.M)


def recognise(text: str) -> str | None:
    """The format of a pasted report, from its markers."""
    if MISMATCH_TEXT in text and not re.search(r"^\|\s*\d+\s+\S", text, re.M):   # nvidia-smi printed no GPU
        return NVML
    if _AMD.search(text):
        return AMD
    if "<nvidia_smi_log" in text or re.search(r"<gpu id=\"", text):
        return XML
    if re.search(r"^[ \t]*CUDA available\s*:", text, re.M) or "sglang.check_env" in text:
        return CHECK_ENV
    if re.search(r"GPU models and configuration\s*:|^PyTorch version\s*:|Collecting environment information",
                 text, re.M):
        return COLLECT_ENV
    # a table pasted with `-L` is read as the table, the -L lines giving the MIG devices' UUIDs
    if "NVIDIA-SMI" in text and "|" in text:
        return TABLE
    if re.search(r"^[ \t]*GPU \d+: .*\(UUID: GPU-", text, re.M):
        return LIST
    if re.search(r"^[ \t]*(FB|BAR1|Conf Compute Protected) Memory Usage[ \t\r]*$", text, re.M) and \
            not re.search(r"^[ \t]*Product Name\s*:", text, re.M):
        return Q_MEMORY
    if "NVSMI LOG" in text or re.search(r"^[ \t]*Product Name\s*:", text, re.M):
        return Q
    first = next((line for line in text.splitlines() if line.strip()), "")
    if "," in first and re.search(r"\bname\b|memory\.total|driver_version|compute_cap|\d MiB|NVIDIA ", first):
        return QUERY
    return None


# -- nvidia-smi -q -x ------------------------------------------------------------------


def _tag(block: str, name: str) -> str | None:
    m = re.search(rf"<{name}>\s*([^<]*?)\s*</{name}>", block)
    return m.group(1) if m else None


def parse_xml(text: str) -> SmiView:
    """`nvidia-smi -q -x`, also when the paste ends inside an element."""
    starts = list(re.finditer(rf"<gpu id=\"({_BUS})\">", text))
    gpus = []
    for i, m in enumerate(starts):
        whole = text[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        # MIG devices come first with their own <fb_memory_usage> (netdata's recorded A100): read them apart
        block = mig.without_xml_devices(whole)
        fb = re.search(r"<fb_memory_usage>\s*<total>\s*(\d+)\s*MiB", block)
        mode = re.search(r"<mig_mode>\s*<current_mig>\s*([^<]*?)\s*</current_mig>", block)
        gpus.append(Gpu(index=i, name=_tag(block, "product_name") or "", memory_mib=int(fb.group(1)) if fb else None,
                        compute_cap=None, pci_bus_id=m.group(1), mig_mode=_na(mode.group(1)) or "" if mode else "",
                        uuid=_na(_tag(block, "uuid")) or "", mig_devices=mig.from_xml_block(whole)))
    head = text[:starts[0].start()] if starts else text
    return SmiView(driver=_version(_tag(head, "driver_version")), cuda=_version(_tag(head, "cuda_version")),
                   gpus=tuple(gpus))


# -- nvidia-smi -L ------------------------------------------------------------------------

_LIST_ROW = re.compile(r"^[ \t]*GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)[ \t\r]*$")


def parse_list(text: str) -> SmiView:
    """`nvidia-smi -L`: one 'GPU 0: NAME (UUID: GPU-...)' line per GPU, each followed by its MIG devices."""
    gpus = [Gpu(index=int(m.group(1)), name=m.group(2), memory_mib=None, compute_cap=None, uuid=m.group(3))
            for m in map(_LIST_ROW.match, text.splitlines()) if m]
    return SmiView(gpus=mig.with_devices(tuple(gpus), mig.from_list(text)))


# -- check_env and collect_env -----------------------------------------------------------


def _value(text: str, key: str) -> str | None:
    """'Key: value' or vLLM's 'Key      : value'; None for empty, N/A, 'Could not collect'."""
    m = re.search(rf"^[ \t]*{key}\s*:[ \t]*(.*?)[ \t\r]*$", text, re.M)
    value = m.group(1) if m else ""
    return None if value in ("", "N/A", "None", "Could not collect", "Module Not Found") else value


def _cuda_of_torch(torch: str | None) -> str | None:
    m = re.search(r"\+cu(\d+)(\d)$", torch or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def parse_check_env(text: str) -> tuple[SmiView, Reported]:
    """`python -m sglang.check_env`: GPUs grouped by name ('GPU 0,1,2: NAME'), compute capability
    per group, the driver, torch, nvcc, sglang and its kernels."""
    names: dict[int, str] = {}
    caps: dict[int, str] = {}
    for m in re.finditer(r"^[ \t]*GPU ([\d,]+)(?:: (.+?)| Compute Capability: (\d+\.\d+))[ \t\r]*$", text, re.M):
        for index in (int(i) for i in m.group(1).split(",") if i):
            if m.group(2):
                names[index] = m.group(2)
            else:
                caps[index] = m.group(3)
    gpus = mig.from_cuda_names(tuple(Gpu(index=i, name=names[i], memory_mib=None, compute_cap=caps.get(i),
                                         compute_cap_source="sglang.check_env" if i in caps else "")
                                     for i in sorted(names)))
    nvcc = re.search(r"^[ \t]*NVCC:.*release (\d+\.\d+)", text, re.M)
    torch = _value(text, "PyTorch")
    reported = Reported(format=CHECK_ENV, torch=torch, torch_cuda=_cuda_of_torch(torch),
                        nvcc=nvcc.group(1) if nvcc else None, sglang=_value(text, "sglang"),
                        sgl_kernel=_value(text, "sgl_kernel"),
                        flashinfer=_value(text, "flashinfer_python") or _value(text, "flashinfer"))
    return SmiView(driver=_version(_value(text, "CUDA Driver Version")), gpus=gpus), reported


def parse_collect_env(text: str) -> tuple[SmiView, Reported]:
    """`python -m torch.utils.collect_env` (and vLLM's copy): 'GPU models and configuration' holds
    one GPU inline or one per following line; no compute capability, no CUDA version of the driver."""
    gpus = []
    m = re.search(r"^[ \t]*GPU models and configuration\s*:(.*)$", text, re.M)
    if m:
        lines = [m.group(1)] + text[m.end():].splitlines()[1:]
        for line in lines:
            row = re.match(r"^[ \t]*GPU (\d+): (.+?)[ \t\r]*$", line)
            if row:
                gpus.append(Gpu(index=int(row.group(1)), name=row.group(2), memory_mib=None, compute_cap=None))
            elif line.strip() and gpus and not mig.LIST_MIG.match(line):   # its -L copy lists MIG devices
                break
    torch = _value(text, "PyTorch version")
    runtime = _value(text, "CUDA runtime version")
    # "OS: Ubuntu 22.04.5 LTS (aarch64)", or the Python platform's "...-aarch64-with-glibc2.35"
    machine = re.search(r"^[ \t]*OS\s*:.*\((x86_64|aarch64)\)[ \t\r]*$", text, re.M) or \
        re.search(r"^[ \t]*Python platform\s*:.*-(x86_64|aarch64)-with", text, re.M)
    reported = Reported(format=COLLECT_ENV, torch=torch,
                        torch_cuda=_version(_value(text, "CUDA used to build PyTorch")) or _cuda_of_torch(torch),
                        cuda_runtime=runtime, wsl="microsoft-standard-WSL" in text,
                        machine=machine.group(1) if machine else None)
    gpus = list(mig.with_devices(tuple(gpus), mig.from_list(text[m.start():] if m else "")))
    return SmiView(driver=_version(_value(text, "Nvidia driver version")), gpus=tuple(gpus)), reported


# -- putting it together --------------------------------------------------------------------

_MISSING = {
    AMD: "NVIDIA GPUs: it is from AMD GPUs (ROCm)",
    Q_MEMORY: "no GPU names: `-d MEMORY` shows only the memory section",
    LIST: "no driver version and no CUDA version",
    QUERY: "no name column, or no header row saying which column is which",
}


def read_report(text: str) -> Report:
    """Whatever a pasted file shows, in the same terms the probe produces."""
    fmt = recognise(text)
    reported = None
    if fmt == AMD:
        return Report(fmt, (), Driver(None, None), (), None, missing=_MISSING[AMD])
    if fmt == NVML:
        lib = re.search(r"NVML library version:\s*(\d+\.\d+(?:\.\d+)?)", text)
        return Report(fmt, (), Driver(None, None), (), None,
                      missing=f"nvidia-smi stopped at NVML's {MISMATCH_TEXT}"
                              + (f" (NVML library version {lib.group(1)})" if lib else ""))
    if fmt in (CHECK_ENV, COLLECT_ENV):
        cut = _cut(text, fmt)
        if cut:
            return Report(fmt, (), Driver(None, None), (), None, missing=cut)
    if fmt in (TABLE, Q, QUERY, Q_MEMORY, None):
        gpus, driver, problems = gpus_and_driver(_query(text), text, text, None, text)
    else:
        if fmt == XML:
            view = parse_xml(text)
        elif fmt == LIST:
            view = parse_list(text)
        elif fmt == CHECK_ENV:
            view, reported = parse_check_env(text)
        else:
            view, reported = parse_collect_env(text)
        gpus, driver, problems = _with_caps(view)
    # A GPU without a name (-d MEMORY shows only bus ids) gives no compute capability to plan with.
    gpus = tuple(g for g in gpus if g.name)
    if not gpus:
        missing = _MISSING.get(fmt or "", "no GPU rows in it")
        return Report(fmt, (), driver, (), reported, missing=missing)
    if fmt in (LIST, COLLECT_ENV, CHECK_ENV, XML) and driver.cuda is None:
        problems.append(f"{fmt} does not show the CUDA version the driver supports")
    return Report(fmt, gpus, driver, tuple(problems), reported)


_GPU_KEY = {CHECK_ENV: r"^[ \t]*GPU [\d,]+: ", COLLECT_ENV: r"GPU models and configuration\s*:"}


def _cut(text: str, fmt: str) -> str:
    """Why a pasted environment report cannot be trusted for its GPUs: it ends before its GPU list,
    or on a GPU's name line, which may be cut inside the name ("NVIDIA B3" of "NVIDIA B300 SXM6 AC");
    "" when it goes on past them."""
    if not re.search(_GPU_KEY[fmt], text, re.M):
        if fmt == CHECK_ENV and re.search(r"CUDA available: \S+ GPU [\d,]+: \S", text):
            # a paste that lost its line breaks: "... CUDA available: True GPU 0: NVIDIA GB10 GPU 0 Compute ..."
            return ("its GPUs line by line: the report's lines were joined into one (the paste lost its line "
                    "breaks), so where a GPU's name ends cannot be told")
        return "its GPUs: the report ends before its GPU list (it was cut off)"
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if len(lines) > 1 and re.match(r"^[ \t]*GPU(?: [\d,]*)?:?[ \t]*$", last) and \
            re.match(r"^[ \t]*(?:GPU models and configuration\s*:\s*)?GPU [\d,]+: \S", lines[-2]):
        # "GPU 0: NVIDIA A100-SXM4-80GB" then "GPU": cut inside the list, so the GPUs after it are missing
        return (f"all its GPUs: the report is cut off inside its GPU list ({last.strip()!r} after "
                f"{lines[-2].strip()!r}), so GPUs after those shown are missing")
    m = re.match(r"^[ \t]*(?:GPU models and configuration\s*:\s*)?GPU ([\d,]+): \S", last)
    if m:
        index = m.group(1).split(",")[-1]
        return (f"a whole GPU name: the report is cut off on GPU {index}'s name line ({last.strip()!r}), so "
                "the name may be cut too")
    return ""


def _query(text: str) -> str | None:
    """The CSV query, with an index column added when the paste has none (rows are in index order)."""
    view = parse_query(text)
    if view.gpus:
        return text
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and re.search(r"(^|,)\s*name\s*(,|$)", lines[0]) and "index" not in lines[0]:
        return "\n".join(["index, " + lines[0]] + [f"{i}, {line}" for i, line in enumerate(lines[1:])])
    return None


def _with_caps(view: SmiView) -> tuple[tuple[Gpu, ...], Driver, list[str]]:
    gpus = tuple(with_compute_cap(g) for g in view.gpus)
    problems = [f"GPU {g.index} ({g.name}): compute capability unknown; add the product "
                "to gpunode/facts/data/compute_caps.yml" for g in gpus if not g.compute_cap]
    return gpus, Driver(version=view.driver, cuda=view.cuda), problems


def refusal(path: str, report: Report) -> tuple[str, str]:
    """(message, hint) for a file with no usable GPU, in at most 5 lines; never the file itself."""
    if report.format == AMD:
        return (f"{path}: an AMD GPU report (ROCm): gpunode plans NVIDIA GPUs only; its pin sets are CUDA builds "
                "of SGLang and vLLM",
                "AMD GPUs are not supported by gpunode: run SGLang's or vLLM's ROCm build on this machine "
                "yourself, or give the report of a machine with NVIDIA GPUs")
    if report.format == NVML:
        return (f"{path}: no GPU can be read from it: {report.missing}\nthe loaded driver and the library differ: "
                "reload the nvidia module or reboot",
                "the kernel module still loaded is not the version of the driver libraries installed since: unload "
                "and load the nvidia modules (or reboot), then save `nvidia-smi`'s output again; in an LXC container "
                "the container's driver libraries must be the host module's version (inv onboard installs them)")
    what = f"recognised as `{report.format}` output" if report.format else "not a GPU report gpunode knows"
    seen = f"; driver {report.driver.version}" if report.driver.version else ""
    return (f"{path}: no GPU can be read from it ({what}{seen})\nmissing: {report.missing}",
            f"save the output of {USABLE} from the node into the file")
