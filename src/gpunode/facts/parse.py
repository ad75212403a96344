"""RawFacts -> Facts: every area's pure parser applied to its sections."""

from __future__ import annotations

import dataclasses

from gpunode.facts import cuda, gpu, install, model, system
from gpunode.facts.snapshot import RawFacts
from gpunode.facts.types import Facts, Install, System


def parse(raw: RawFacts) -> Facts:
    """Pure: the same snapshot always gives the same facts."""
    gpus, driver, problems = gpu.gpus_and_driver(
        raw.ok("nvidia_query"), _any(raw, "nvidia_smi"), _any(raw, "nvidia_smi_q"), raw.ok("driver_proc"),
        raw.ok("nvidia_smi_list"))
    libs = cuda.parse_libs(raw.ok("libs") or "")
    os_id, os_version = system.parse_os_release(raw.ok("os_release") or "")
    pythons, default_python = system.parse_pythons(raw.ok("pythons") or "")
    shm_size, shm_free = system.parse_df(raw.ok("shm") or "")
    _, venv_free = system.parse_df(raw.ok("disk") or "")
    in_container, systemd = system.parse_container(raw.ok("container") or "")
    host = system.keyvals(raw.ok("host") or "")
    sysfacts = System(
        os_id=os_id,
        os_version=os_version,
        arch=(host.get("uname", "").split() or [""])[-1],
        glibc=system.parse_glibc(raw.ok("glibc") or ""),
        pythons=pythons,
        default_python=default_python,
        cpus=system.parse_cpus(raw.ok("cpus") or ""),
        mem_total_bytes=system.parse_meminfo(raw.ok("meminfo") or ""),
        mem_limit_bytes=system.parse_memlimit(raw.ok("memlimit") or ""),
        shm_size_bytes=shm_size,
        shm_free_bytes=shm_free,
        venv_root_free_bytes=venv_free,
        libcuda=libs.libcuda,
        libcuda_version=libs.libcuda_version,
        libnuma=libs.libnuma,
        toolkits=cuda.parse_toolkits(raw.ok("cuda_toolkits") or "", raw.venv),
        in_container=in_container,
        systemd=systemd,
    )
    if driver.version and libs.libcuda_version and libs.libcuda_version != driver.version:
        problems.append(f"the driver's user-space library is libcuda.so.{libs.libcuda_version} but the "
                        f"kernel module is {driver.version}; they must match exactly")
    if driver.version and not libs.libcuda:
        problems.append("libcuda.so.1 is missing: the driver's user-space libraries are not installed here")
    venv_text = raw.ok("venv")
    inst = install.parse_venv(venv_text, raw.venv or "") if venv_text is not None else Install(venv=raw.venv or "")
    mdl = None
    if raw.model_path:
        mdl = model.parse_model(raw.model_path, raw.ok("model_files"), raw.ok("model_config"),
                                raw.ok("model_index"), raw.ok("model_quant"), raw.ok("model_header"))
        refused = [s.output.strip() for s in map(raw.get, ("model_config", "model_index", "model_quant"))
                   if s is not None and s.rc == model.REFUSED]
        if refused and not mdl.config_problem:  # a FIFO or a 1 GB file where a JSON file belongs
            mdl = dataclasses.replace(mdl, config_problem="; ".join(refused)[:300])
    return Facts(target=raw.target, gpus=gpus, driver=driver, system=sysfacts, install=inst, model=mdl,
                 problems=tuple(problems))


def _any(raw: RawFacts, name: str) -> str | None:
    """A section's output whatever its exit code: nvidia-smi prints its table and
    then exits non-zero when, say, one GPU has fallen off the bus."""
    section = raw.get(name)
    return section.output if section is not None else None
