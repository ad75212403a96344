"""tests/device/pack_wheels.py rewrites each carried wheel stored; the files must keep their modes.

On the lent H100 (issue 42) the bundle's nvcc, ptxas and cicc came out 0600 and every server died at
its first JIT compile with `PermissionError: ... nvidia/cu13/bin/nvcc`. The wheel here is built the way
nvidia-cuda-nvcc's is (Unix external_attr on each entry), then packed and installed as the device does.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

DEVICE = Path(__file__).resolve().parents[1] / "device"
sys.path.insert(0, str(DEVICE))
import pack_wheels  # noqa: E402

DIST = "nvidia_cuda_nvcc-13.0.88.dist-info"
ENTRIES = {"nvidia/cu13/bin/nvcc": 0o755, "nvidia/cu13/bin/ptxas": 0o744, "nvidia/cu13/nvvm/bin/cicc": 0o755,
           "nvidia/cu13/include/cuda.h": 0o644, f"{DIST}/METADATA": 0o644, f"{DIST}/WHEEL": 0o644,
           f"{DIST}/RECORD": 0o644}
TEXT = {f"{DIST}/METADATA": "Metadata-Version: 2.1\nName: nvidia-cuda-nvcc\nVersion: 13.0.88\n",
        f"{DIST}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{DIST}/RECORD": "".join(f"{n},,\n" for n in ENTRIES)}


def wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, mode in ENTRIES.items():
            info = zipfile.ZipInfo(name, date_time=(2025, 8, 1, 12, 0, 0))
            info.create_system = 3  # Unix: pip reads the mode from the high 16 bits
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, TEXT.get(name, f"#!/bin/sh\n# {name}\n" * 50).encode())
    return path


def test_packed_wheel_keeps_every_mode_and_byte(tmp_path):
    src = wheel(tmp_path / "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl")
    out = tmp_path / "stored" / src.name
    out.parent.mkdir()
    pack_wheels.stored(src, out)
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(out) as b:
        assert [i.filename for i in b.infolist()] == list(ENTRIES)
        for info in b.infolist():
            assert info.compress_type == zipfile.ZIP_STORED, info.filename  # zstd must see raw bytes
            assert stat.S_IMODE(info.external_attr >> 16) == ENTRIES[info.filename], info.filename
            assert b.read(info) == a.read(info.filename)


def test_carried_executables_install_executable(tmp_path):
    """The packed wheel installed as the device installs it (an installer, offline, no deps): nvcc runs."""
    src = wheel(tmp_path / "nvidia_cuda_nvcc-13.0.88-py3-none-any.whl")
    out = tmp_path / "stored" / src.name
    out.parent.mkdir()
    pack_wheels.stored(src, out)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv (a dev dependency) installs the wheel here"
    site = tmp_path / "site"
    r = subprocess.run([uv, "pip", "install", "--offline", "--no-deps", "--no-cache", "--python", sys.executable,
                        "--target", str(site), str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for exe in ("nvidia/cu13/bin/nvcc", "nvidia/cu13/bin/ptxas", "nvidia/cu13/nvvm/bin/cicc"):
        assert (site / exe).stat().st_mode & stat.S_IXUSR, exe
        assert subprocess.run([str(site / exe)], timeout=10).returncode == 0, exe
    assert not (site / "nvidia/cu13/include/cuda.h").stat().st_mode & stat.S_IXUSR
