"""Typed facts about one target. Parsers in this package produce them; the
resolver consumes them. Everything here is plain data (JSON-serialisable via
dataclasses.asdict) so that a snapshot can be saved and replayed offline.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a compute instance in its GPU instance): what CUDA sees as a GPU of its own."""

    index: int                      # nvidia-smi's "MIG Dev" / "Device N" on its GPU
    profile: str = ""               # "1g.10gb"; "" where the format does not show it (table, -q, XML)
    memory_mib: int | None = None   # None where the format does not show it (-L)
    uuid: str = ""                  # "MIG-<uuid>" (R470+), "MIG-GPU-<uuid>/<gi>/<ci>" (R450/R460); only -L shows it
    gpu_instance: int | None = None
    compute_instance: int | None = None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str                       # "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    memory_mib: int | None          # None where nvidia-smi says "Not Supported" (GB10)
    compute_cap: str | None         # "12.0"; None only when neither nvidia-smi nor the table knows
    compute_cap_source: str = ""    # "nvidia-smi" or "product table (<source>)"
    pci_bus_id: str = ""
    mig_mode: str = ""              # "Enabled" / "Disabled" / "" (N/A)
    uuid: str = ""
    mig_devices: tuple[MigDevice, ...] = ()   # MIG on: the instances the report shows


@dataclass(frozen=True)
class Driver:
    # "580.65.06": the kernel module's version (/proc/driver/nvidia/version) when
    # readable, else what nvidia-smi reports; None when no driver answers.
    version: str | None
    cuda: str | None                # CUDA version the driver supports, "13.0"; None for "Not Found"


@dataclass(frozen=True)
class CudaToolkit:
    path: str                       # "/usr/local/cuda-12.8" or ".../site-packages/nvidia/cuda_nvcc"
    version: str                    # "12.8"
    kind: str                       # "system" | "pip"


@dataclass(frozen=True)
class System:
    os_id: str = ""                 # "debian"
    os_version: str = ""            # "12"
    arch: str = ""                  # "x86_64"
    glibc: str | None = None        # "2.36"
    pythons: tuple[str, ...] = ()   # ("3.11",) versions found as python3.X
    default_python: str | None = None
    cpus: int = 0
    mem_total_bytes: int = 0
    mem_limit_bytes: int | None = None   # cgroup limit of the container; None = unlimited
    shm_size_bytes: int = 0
    shm_free_bytes: int = 0
    venv_root_free_bytes: int = 0
    libcuda: bool = False           # libcuda.so.1 resolvable
    libcuda_version: str | None = None   # from the libcuda.so.<ver> file name
    libnuma: bool = False
    toolkits: tuple[CudaToolkit, ...] = ()
    in_container: bool = False
    systemd: bool = False

    def memory_bound(self) -> tuple[int, str] | None:
        """(bytes, what) of the memory the servers and /dev/shm share: the smaller of the cgroup limit
        and MemTotal. A Proxmox guest sees no cgroup limit (it runs in lxc/<vmid>/ns); lxcfs shows
        that limit as MemTotal. None when neither is known."""
        known = [(b, what) for b, what in ((self.mem_limit_bytes, "the container's memory limit"),
                                           (self.mem_total_bytes, "the target's memory (MemTotal)")) if b]
        return min(known) if known else None


@dataclass(frozen=True)
class Install:
    """What an existing venv holds (all None when there is no venv)."""

    venv: str = ""
    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    sglang: str | None = None
    kernel_package: str | None = None     # "sglang-kernel" or "sgl-kernel"
    kernel_version: str | None = None
    flashinfer: str | None = None
    vllm: str | None = None


@dataclass(frozen=True)
class Model:
    path: str
    exists: bool = True
    architectures: tuple[str, ...] = ()
    model_type: str = ""
    text_model_type: str = ""
    hybrid_linear_attention: bool = False
    layer_types: tuple[str, ...] = ()
    dtype: str = ""
    quantization: str | None = None       # "fp8", "nvfp4", ...
    quantization_source: str = ""         # the file that named it: "hf_quant_config.json quant_algo", ...
    # the quantization as the checkpoint names it and where: "mixed_precision, hf_quant_config.json only"
    # (facts/model.py quantization_form); the derived data judges each form apart (judge/derive.py)
    quantization_form: str = ""
    moe_experts: int = 0                  # routed experts per MoE layer (0: a dense model)
    size_bytes: int = 0
    shards: tuple[str, ...] = ()
    missing_shards: tuple[str, ...] = ()
    unserved: tuple[str, ...] = ()        # weight files the servers do not load (facts/served.py)
    mtp_config: bool = False
    mtp_weights: bool = False
    num_parameters: int | None = None
    max_position_embeddings: int | None = None
    size_source: str = ""                 # "files on disk", "...index.json metadata.total_size", "estimated ..."
    config_problem: str = ""              # why config.json / the index cannot be used ("" when they can)
    custom_code: tuple[str, ...] = ()     # config.json's auto_map keys: the repository ships Python code


@dataclass(frozen=True)
class Reported:
    """What a pasted environment report (sglang.check_env, torch collect_env) says about the
    software of the machine it ran on; None where it says nothing or 'Could not collect'."""

    format: str
    torch: str | None = None              # "2.3.1+cu121"
    torch_cuda: str | None = None         # CUDA torch was built for, "12.1"
    cuda_runtime: str | None = None       # collect_env's "CUDA runtime version", "12.4.131"
    nvcc: str | None = None               # check_env's NVCC release, "12.1"
    sglang: str | None = None
    sgl_kernel: str | None = None
    flashinfer: str | None = None
    wsl: bool = False                     # the report ran under WSL2
    machine: str | None = None            # the CPU architecture it names ("x86_64", "aarch64")


@dataclass(frozen=True)
class IbPort:
    device: str           # "mlx5_0"
    port: int
    active: bool          # state ACTIVE (sysfs "4: ACTIVE", ibstat "Active")
    link_layer: str       # "InfiniBand" | "Ethernet" (RoCE)
    rate: str = ""        # "400 Gb/sec (4X NDR)" or ibstat's "400"

    @property
    def hca(self) -> str:
        """NCCL_IB_HCA's form: device:port."""
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class Network:
    head: str                             # the address the route was asked for
    interface: str | None = None          # the interface holding the route to the head
    source: str | None = None             # this node's address on that route
    ib_ports: tuple[IbPort, ...] = ()
    problem: str = ""                     # why the interface is unknown ("" when it is known)

    def active_ib(self) -> tuple[IbPort, ...]:
        return tuple(p for p in self.ib_ports if p.active)


@dataclass(frozen=True)
class Facts:
    target: str
    gpus: tuple[Gpu, ...] = ()
    driver: Driver = field(default_factory=lambda: Driver(None, None))
    system: System = field(default_factory=System)
    install: Install = field(default_factory=Install)
    model: Model | None = None
    reported: Reported | None = None      # offline: what a pasted environment report says
    network: Network | None = None        # multi-node plans only: the route to the head, InfiniBand ports
    # What the parsers noticed but could not turn into a value, one sentence
    # each ("libcuda.so.570.86.10 but the kernel module is 580.65.06").
    problems: tuple[str, ...] = ()
