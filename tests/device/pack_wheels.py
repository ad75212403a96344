"""The cu13-b lock's wheels that the lent machine's image lacks, packed into parts a device call can carry.

Run here (it downloads from PyPI): `python3 tests/device/pack_wheels.py WORKDIR`. It writes
WORKDIR/bundle/partNN (54 MiB each: with the ~7.5 MiB working tree, under a call's 64 MiB), to be
carried one a call into /root/parts, then `cat part* | zstd -d | tar -x` there (the image has no
zstd binary: serve_proof's README line uses the carried zstandard wheel). What it leaves out, and
why, is in tests/data/device/h100-serve/README.md:
- the lock's packages the image has (tests/device/KINDS.md's list) unless small (< 1.5 MB) or
  pinned apart from the image's (transformers, tokenizers, sentencepiece);
- the nine wheels never imported serving Qwen3/Qwen3.5 on sm_90 (serve_proof.NOT_CARRIED);
- of sglang-kernel 0.4.5, sgl_kernel/sm100/ (loaded on sm_100 only) and the sm_80/sm_86 cubins of
  flash_ops.abi3.so (zeroed in place, so the ELF and its fat binary keep their layout; an sm_90
  GPU loads only the sm_90 entries): 383 MB of wheel become ~150 MB of zstd.
Every wheel is rewritten uncompressed (zip stored) so that zstd sees the raw bytes, each entry keeping its
file mode (the executables of nvidia-cuda-nvcc and the like stay executable).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import struct
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "src/gpunode/compat/locks/cu13-b/pylock.x86_64-py312.toml"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_proof import NOT_CARRIED  # noqa: E402

# The image's packages, as /work/.library/device/KINDS.md lists them (read there on 2026-11-17).
IMAGE_PACKAGES = set("""
absl-py, accelerate, aiofiles, aiohappyeyeballs, aiohttp, aiosignal, annotated-doc, anyio, attrs,
botorch, build, certifi, charset-normalizer, chex, click, cloudpickle, cmake, colorama, contourpy,
coverage, cuda-bindings, cuda-core, cuda-pathfinder, cuda-toolkit, cupy-cuda13x, cycler, cython,
diffrax, e3nn, einops, equinox, etils, execnet, filelock, flatbuffers, flax, fonttools, formulaic,
frozenlist, fsspec, gpytorch, grpcio, h11, h5py, hf-xet, httpcore, httpx, huggingface-hub, humanize,
hypothesis, idna, imageio, iniconfig, interface-meta, jax, jax-cuda13-pjrt, jax-cuda13-plugin,
jaxlib, jaxtyping, jinja2, joblib, kiwisolver, lazy-loader, lightning, lightning-utilities,
linear-operator, lineax, llvmlite, lxml, markdown, markdown-it-py, markupsafe, matplotlib, mdurl,
meson, ml-dtypes, mpi4py, mpmath, msgpack, multidict, multipledispatch, mypy-extensions, nanobind,
narwhals, networkx, ninja, numba, numba-cuda, numpy, numpyro, nvidia-cublas, nvidia-cuda-cupti,
nvidia-cuda-nvrtc, nvidia-cuda-runtime, nvidia-cudnn-cu13, nvidia-cufft, nvidia-cufile,
nvidia-curand, nvidia-cusolver, nvidia-cusparse, nvidia-cusparselt-cu13, nvidia-ml-py,
nvidia-nccl-cu13, nvidia-nvjitlink, nvidia-nvshmem-cu13, nvidia-nvtx, onnx, onnx-ir, onnxruntime,
onnxscript, opencv-python-headless, optax, opt-einsum, opt-einsum-fx, optimistix, orbax-checkpoint,
packaging, pandas, pathspec, patsy, peft, pillow, pip, pluggy, portalocker, prometheus-client,
propcache, protobuf, psutil, pyarrow, pybind11, py-cpuinfo, pygments, pyparsing, pyproject-hooks,
pyre-extensions, pytest, pytest-benchmark, pytest-cov, pytest-mock, pytest-timeout, pytest-xdist,
python-dateutil, pytorch-lightning, pyyaml, regex, requests, rich, sacrebleu, safetensors,
scikit-build-core, scikit-image, scikit-learn, scipy, seaborn, sentencepiece, sentence-transformers,
setuptools, shellingham, simplejson, six, sortedcontainers, statsmodels, sympy, tabulate,
tensorboard, tensorboard-data-server, tensorstore, threadpoolctl, tifffile, tiktoken, timm,
tokenizers, toolz, torch, torchaudio, torchdiffeq, torch-geometric, torchmetrics, torchvision, tqdm,
transformers, treescope, triton, typer, typing-extensions, typing-inspect, urllib3, uvloop,
wadler-lindig, werkzeug, wheel, wrapt, xarray, xxhash, yarl, zipp
""".replace(",", " ").split())

PINNED_APART = {"transformers", "tokenizers", "sentencepiece"}
FLASH_OPS = "sgl_kernel/flash_ops.abi3.so"


def usable(url: str) -> bool:
    """A wheel that installs on the machine: glibc Linux x86_64 for CPython 3.12, or pure Python."""
    f = url.rsplit("/", 1)[1]
    if "musllinux" in f:
        return False
    if f.endswith("-none-any.whl"):
        return True
    glibc = [int(x) for x in re.findall(r"manylinux_2_(\d+)", f)]
    return "x86_64" in f and ("cp312" in f or "abi3" in f or "py3-none" in f) and (not glibc or min(glibc) <= 35)


def picks() -> list[tuple[str, str, str]]:
    out = []
    for p in tomllib.loads(LOCK.read_text())["packages"]:
        name = p["name"].lower()
        ws = [w for w in p["wheels"] if usable(w["url"])]
        # a platform wheel first: a pure fallback may lack the native library (soundfile's libsndfile)
        w = ([w for w in ws if not w["url"].endswith("-none-any.whl")] or ws)[0]
        small = min(x["size"] for x in ws) < 1_500_000
        if name in NOT_CARRIED or (name in IMAGE_PACKAGES and name not in PINNED_APART and not small):
            continue
        out.append((name, p["version"], w["url"]))
    return out


def zero_foreign_cubins(data: bytearray, keep: int = 90) -> int:
    """Zero the payload of every fat-binary entry for another SM than `keep`; returns bytes zeroed."""
    zeroed, i = 0, 0
    while (i := data.find(b"\x50\xed\x55\xba", i)) >= 0:
        version, header, size = struct.unpack_from("<HHQ", data, i + 4)
        if version != 1 or header != 16:
            i += 4
            continue
        j, end = i + header, i + header + size
        while j < end:
            _, _, ehead, payload = struct.unpack_from("<HHIQ", data, j)
            if struct.unpack_from("<I", data, j + 28)[0] != keep:
                data[j + ehead:j + ehead + payload] = bytes(payload)
                zeroed += payload
            j += ehead + payload
        i = end
    return zeroed


def stored(src: Path, dst: Path) -> None:
    """The wheel rewritten uncompressed; sglang-kernel slimmed for sm_90 with its RECORD kept true."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        files = {i.filename: zi.read(i) for i in zi.infolist()}
        if src.name.startswith("sglang_kernel-"):
            files = {k: v for k, v in files.items() if not k.startswith("sgl_kernel/sm100/")}
            ops = bytearray(files[FLASH_OPS])
            zero_foreign_cubins(ops)
            files[FLASH_OPS] = bytes(ops)
            record = next(k for k in files if k.endswith(".dist-info/RECORD"))
            rows = []
            for row in csv.reader(io.StringIO(files[record].decode())):
                if row and row[0] in files:
                    if row[0] == FLASH_OPS:
                        digest = base64.urlsafe_b64encode(hashlib.sha256(ops).digest()).rstrip(b"=").decode()
                        row = [FLASH_OPS, f"sha256={digest}", str(len(ops))]
                    rows.append(row)
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)
            files[record] = buf.getvalue().encode()
        infos = {i.filename: i for i in zi.infolist()}
        for name, data in files.items():
            zo.writestr(kept_mode(infos[name]), data)


def kept_mode(src: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A stored entry that keeps the source entry's Unix mode (external_attr): writestr(name, data) would
    write 0600, and pip would install nvcc, ptxas and cicc unexecutable (issue 42)."""
    info = zipfile.ZipInfo(src.filename, date_time=src.date_time)
    info.external_attr, info.create_system = src.external_attr, src.create_system
    info.compress_type = zipfile.ZIP_STORED
    return info


def main() -> int:
    work = Path(sys.argv[1])
    dl, st, bundle = work / "whl", work / "stored", work / "bundle"
    for d in (dl, st, bundle):
        d.mkdir(parents=True, exist_ok=True)
    chosen = picks()

    def fetch(item: tuple[str, str, str]) -> Path:
        path = dl / item[2].rsplit("/", 1)[1]
        if not path.exists():
            urllib.request.urlretrieve(item[2], path)
        stored(path, st / path.name)
        return path

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(fetch, chosen))
    subprocess.run(f"tar -cf - -C {st} . | zstd -T0 -12 --long=27 -q -o {bundle}/all.tar.zst", shell=True, check=True)
    subprocess.run(["split", "-b", "54M", "-d", "-a", "2", "all.tar.zst", "part"], cwd=bundle, check=True)
    print(len(chosen), "wheels;", sorted(p.name for p in bundle.glob("part*")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
