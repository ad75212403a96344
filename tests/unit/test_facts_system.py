"""System, CUDA and venv parsers on the recorded snapshots (tests/data/snapshots/*/README.md)."""

from __future__ import annotations

from pathlib import Path

from gpunode.facts import cuda, install, system
from gpunode.facts.parse import parse
from gpunode.facts.snapshot import load

SNAPS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
CPU = parse(load(SNAPS / "debian12-cpu"))


def section(snap: str, name: str) -> str:
    return (SNAPS / snap / f"{name}.txt").read_text()


def test_build_machine_without_gpu():
    assert CPU.gpus == () and CPU.driver.version is None
    assert CPU.problems and CPU.problems[0].startswith("no GPU found")
    s = CPU.system
    assert (s.os_id, s.os_version, s.glibc, s.cpus) == ("debian", "12", "2.36", 2)
    assert not s.libcuda and s.libnuma
    # cgroup v1 writes "no limit" as a huge number; that is no limit
    assert "9223372036854771712" in section("debian12-cpu", "memlimit") and s.mem_limit_bytes is None


def test_shm_and_disk_come_from_df_in_kib():
    size, free = system.parse_df(section("debian12-cpu", "shm"))
    assert size == 24683568 * 1024 == CPU.system.shm_size_bytes
    assert 0 < free <= size
    assert CPU.system.venv_root_free_bytes == system.parse_df(section("debian12-cpu", "disk"))[1]


def test_cpu_quota_limits_cpus():
    assert system.parse_cpus("nproc=16\ncpu.max=400000 100000\n") == 4
    assert system.parse_cpus("nproc=16\ncpu.max=150000 100000\n") == 2
    assert system.parse_cpus("nproc=16\ncpu.max=max 100000\n") == 16


def test_smallest_cgroup_limit_wins():
    text = "v2 /lxc/200/ns max\nv2 /lxc/200 68719476736\nv2 /lxc 137438953472\n"
    assert system.parse_memlimit(text) == 64 * 2**30


def test_glibc_from_getconf_or_ldd():
    assert system.parse_glibc("glibc 2.39\n") == "2.39"
    assert system.parse_glibc("ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35\n") == "2.35"
    assert system.parse_glibc("musl libc (x86_64)\nVersion 1.2.4\n") is None


def test_container_detection():
    assert system.parse_container(section("h200", "container")) == (True, False)
    assert system.parse_container("detect_virt=lxc\npid1_env=lxc\npid1=systemd\nsystemd=yes\n") == (True, True)
    assert system.parse_container("detect_virt=none\npid1_env=\npid1=systemd\nsystemd=yes\n") == (False, True)


def test_driver_libraries_from_ldconfig_and_files():
    libs = cuda.parse_libs(section("h200", "libs"))
    assert libs == cuda.Libs(libcuda=True, libcuda_unversioned=True, libcuda_version="580.159.04",
                             nvml_version="580.159.04", libnuma=True)
    only_soname = "file: /usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.570.86.10\n"
    assert cuda.parse_libs(only_soname) == cuda.Libs(libcuda=True, libcuda_version="570.86.10")


def test_toolkits_are_counted_once_per_real_folder():
    text = section("h200", "cuda_toolkits")
    assert text.count("@toolkit") == 3                     # cuda, cuda-13, cuda-13.0: one folder
    assert cuda.parse_toolkits(text) == (cuda.CudaToolkit("/usr/local/cuda-13.0", "13.0", "system"),)


def test_pip_nvcc_layout_is_a_toolkit_of_its_own():
    # The H200's real `nvcc --version` output, as the probe prints it for a venv's
    # nvidia/cu13/bin/nvcc next to an older system toolkit.
    nvcc = section("h200", "cuda_toolkits").split("@nvcc /usr/local/cuda/bin/nvcc\n")[1].split("@")[0]
    text = ("@toolkit /usr/local/cuda /usr/local/cuda-12.8\n@nvcc /usr/local/cuda/bin/nvcc\n"
            + nvcc.replace("13.0", "12.8")
            + "@nvcc /root/venv/lib/python3.12/site-packages/nvidia/cu13/bin/nvcc\n" + nvcc)
    assert cuda.parse_toolkits(text, "/root/venv") == (
        cuda.CudaToolkit("/usr/local/cuda-12.8", "12.8", "system"),
        cuda.CudaToolkit("/root/venv/lib/python3.12/site-packages/nvidia/cu13", "13.0", "pip"),
    )


def test_venv_with_cpu_torch_and_vllm_cpu():
    i = CPU.install
    assert (i.python, i.torch, i.torch_cuda, i.vllm) == ("3.11", "2.13.0+cpu", None, "0.32.0")
    assert i.sglang is None and i.kernel_package is None and i.flashinfer is None


def test_kernel_package_rename_is_told_apart():
    old = install.parse_venv("@site-packages /v\nsgl_kernel-0.3.21.dist-info\nsglang-0.5.9.dist-info\n", "/v")
    new = install.parse_venv("@site-packages /v\nsglang_kernel-0.4.2.post2.dist-info\n"
                             "flashinfer_python-0.6.11.post1.dist-info\ntorch-2.11.0.dist-info\n", "/v")
    assert (old.kernel_package, old.kernel_version, old.sglang) == ("sgl-kernel", "0.3.21", "0.5.9")
    assert (new.kernel_package, new.kernel_version, new.flashinfer) == ("sglang-kernel", "0.4.2.post2",
                                                                         "0.6.11.post1")
    assert new.torch_cuda is None, "no version.py and no +cuXYZ label: unknown, not guessed"


def test_torch_cuda_from_version_py_of_the_h200_venv():
    h200 = parse(load(SNAPS / "h200")).install
    assert "cuda: Optional[str] = '13.0'" in section("h200", "venv")
    assert (h200.torch, h200.torch_cuda, h200.python) == ("2.11.0", "13.0", "3.12")
