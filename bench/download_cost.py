"""What a machine without caches downloads for README's test command, piece by piece (issue 46).

    .venv/bin/python bench/download_cost.py            # every piece
    .venv/bin/python bench/download_cost.py --plans    # and the plans the judge's records lack
    .venv/bin/python bench/download_cost.py --json F   # also write the figures to F

bench/testrun_cost.py counts the whole machine's interfaces, which other work on a shared machine
adds to; `scripts/prove-fresh` prints the exact bytes its fresh root received over its one link.
This script says where the bytes go, each piece from what decides it, without downloading it:

- kernel wheels (tests/test_kernel_sms.py): the wheels `kernelsms.unread` says must be read again
  (their sizes from the locks); 0 when every recorded wheel is the one the locks pin;
- judge environments (tests/test_sglang_judge.py): per SGLang pin set, whether its verdict record
  is current (lock and judge code unchanged) and, with --plans (about 20 s), how many of the main
  test's cases (every plan and the derived cases) it lacks; a pin set with either builds its
  judge environment (the multi-node test's few cases are not counted here);
- the lab's cpu wheelhouse (`inv lab.up`): the request built by the lab's own builder into a
  temporary folder from the lab's wheelhouse and torch folder with no index (no network), so the
  sum is exactly the wheels a fresh machine downloads (the +cpu torch included);
- the pinned sglang and transformers wheels (tests/test_wheel_flags.py, test_wheel_registry.py):
  the cache folders they fill;
- Debian packages: scripts/setup's host packages on a fresh debootstrapped Debian 12 (apt's own
  answer, `--print-uris` against the pristine root of scripts/prove-fresh, when it is there), and
  the lab's base rootfs (every package installed in it, at the sizes the host's bookworm lists
  give) plus the container apt repo's .debs;
- the project venv (scripts/setup: requirements-dev.lock): the wheel sizes pip's report gives
  for a fresh install (`pip install --dry-run --report`, which downloads nothing but metadata).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PRISTINE = Path("/var/tmp/gpunode-fresh/pristine")


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def folder_bytes(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file()) if path.exists() else 0


def kernel_wheels() -> dict:
    from gpunode.knowledge import kernelsms

    sizes: dict[str, int] = {}
    for lock in sorted(kernelsms.LOCKS.glob("*/pylock.*.toml")):
        for pkg in tomllib.loads(lock.read_text())["packages"]:
            for w in pkg.get("wheels", []):
                sizes[w["hashes"]["sha256"]] = int(w.get("size") or 0)
    read, locks = kernelsms.load_read(), kernelsms.locked()

    def size(keys: list[tuple[str, str, str]]) -> int:
        # a kernel with several locked wheels (vllm's build tags): pip takes one, about the size of either
        return sum(max((sizes.get(h, 0) for h in locks.get(kernelsms.key(*k), {}).values()), default=0) for k in keys)

    again = kernelsms.unread(read, locks)
    return {"bytes": size(again), "read_again": [kernelsms.key(*k) for k in again],
            "all_wheels_bytes": size(kernelsms.wanted()), "sealed": kernelsms.sealed(read, kernelsms.FILE.read_text())}


def judge_records(plans: bool) -> dict:
    from gpunode.judge import record
    from gpunode.judge.env import lock_file
    from gpunode.resolve import load_kb
    from tests.test_sglang_judge import DATA, KB, LOCKS, cases_for, derive, env_pinset

    out, missing = {}, {}
    for p in load_kb().pinsets:
        if p.engine != "sglang":
            continue
        rec, lock = record.load(p.id), lock_file(LOCKS, env_pinset(p.id))
        out[p.id] = bool(rec.seal) and lock.exists() and rec.seal == rec.sealed() and \
            rec.lock == record.lock_digest(lock) and rec.judge == record.judge_digest()
        if plans and lock.exists():
            # what tests/test_sglang_judge.py's main test gives the judge: every plan and the derived cases
            cases = cases_for(p.id)[0]
            cases += derive.derive_cases(derive.references(DATA / "models"),
                                         derive.reference_gpus(p.torch_cuda or "13.0"), derive.kb_choices(KB, p))
            missing[p.id] = len(record.lookup(p.id, lock, cases).missing)
    got: dict = {"current": out}
    if plans:
        got["plans_not_recorded"] = missing
    # a pin set with a record not current, or with plans it lacks, builds its judge environment
    # (about 0.3-0.4 GB each from PyPI, and the base venv's torch: docs/bench-results/test-run.md)
    built = [k for k, v in out.items() if not v or missing.get(k)]
    got["bytes"] = 0 if not built and plans else None
    got["builds"] = built if plans else "not known without --plans (planning every recorded GPU x model)"
    return got


def lab_wheelhouse() -> dict:
    from gpunode_lab import cpu_profile
    from gpunode_lab.wheelhouse import build_wheelhouse

    if not cpu_profile.WHEELS.exists():
        return {"bytes": None, "why": f"{cpu_profile.WHEELS} is not there (inv lab.up makes it)"}
    lock, router = cpu_profile.locked(), cpu_profile.locked(cpu_profile.ROUTER_LOCK)
    wanted = [r for r in cpu_profile.requirements() if not (router and r.startswith("sglang-router"))]
    lock = cpu_profile.installed(lock)
    tmp = Path(tempfile.mkdtemp(prefix="download-cost-wheels-"))
    try:
        house = build_wheelhouse(tmp, cpu_profile.pinned(wanted, lock), no_index=True, no_deps=bool(lock and router),
                                 find_links=[str(cpu_profile.WHEELS), str(cpu_profile.TORCH_LINKS)],
                                 also=[[line.split(" ", 1)[0] for line in router]] if router else ())
        biggest = sorted(((tmp / n).stat().st_size, n) for n in house.files)[-6:]
        return {"bytes": house.total_bytes, "wheels": len(house.files), "lacks": house.lacks(lock + router),
                "present_folder_bytes": folder_bytes(cpu_profile.WHEELS, "*.whl"),
                "largest": [[n, s] for s, n in reversed(biggest)]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sglang_wheels() -> dict:
    home = Path.home() / ".cache" / "gpunode"
    return {"bytes": folder_bytes(home / "sglang-wheels", "*.whl") + folder_bytes(home / "wheels", "*.whl"),
            "folders": [str(home / "sglang-wheels"), str(home / "wheels")]}


def apt_sizes(names: list[str], status: Path | None = None) -> tuple[int, int]:
    """(bytes, packages) apt would download to install `names` on a system whose dpkg status is `status`."""
    argv = ["apt-get", "install", "--print-uris", "-qq", "--no-install-recommends", "-o", "APT::Get::Assume-Yes=1"]
    if status:
        argv += ["-o", f"Dir::State::status={status}"]
    out = subprocess.run([*argv, *names], capture_output=True, text=True, check=False).stdout.splitlines()
    sizes = [int(line.split()[2]) for line in out if line.startswith("'")]
    return sum(sizes), len(sizes)


def debian() -> dict:
    host = [ln.split("#")[0].strip() for ln in (REPO / "scripts/host-packages.txt").read_text().splitlines()]
    host = [n for n in host if n]
    out: dict = {}
    status = PRISTINE / "var/lib/dpkg/status"
    if status.exists():
        out["setup_bytes"], out["setup_packages"] = apt_sizes(host, status)
    from gpunode_lab import paths

    base = paths.BASE_ROOTFS / "var/lib/dpkg/status"
    if base.exists():
        names = [b.split(": ", 1)[1] for b in base.read_text().split("\n")
                 if b.startswith("Package: ")]
        shown = subprocess.run(["apt-cache", "show", "--no-all-versions", *names], capture_output=True,
                               text=True, check=False).stdout
        out["base_rootfs_bytes"] = sum(int(line.split()[1]) for line in shown.splitlines() if line.startswith("Size: "))
        out["base_rootfs_packages"] = len(names)
    out["lab_apt_repo_bytes"] = folder_bytes(paths.DEBS, "*.deb")
    out["bytes"] = sum(v for k, v in out.items() if k.endswith("_bytes"))
    return out


def project_venv() -> dict:
    lock = REPO / "requirements-dev.lock"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                               "--report", str(report), "-r", str(lock)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return {"bytes": None, "why": proc.stderr.strip()[-300:]}
        items = json.loads(report.read_text())["install"]
    urls = [i["download_info"]["url"] for i in items]
    # pip's report names each wheel but not its size: the size is the Content-Length of a HEAD request
    total = 0
    for url in urls:
        if url.startswith("file:"):
            total += Path(url[7:]).stat().st_size
            continue
        head = subprocess.run(["curl", "-sIL", url], capture_output=True, text=True, check=False).stdout
        lengths = [int(line.split(":")[1]) for line in head.splitlines() if line.lower().startswith("content-length:")]
        total += lengths[-1] if lengths else 0
    return {"bytes": total, "wheels": len(urls)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--plans", action="store_true", help="also plan every judge case (minutes) to count the "
                    "plans the verdict records lack")
    a = ap.parse_args()
    os.chdir(REPO)
    pieces = {"kernel wheels (tests/test_kernel_sms.py)": kernel_wheels,
              "judge environments (tests/test_sglang_judge.py)": lambda: judge_records(a.plans),
              "lab cpu wheelhouse (inv lab.up)": lab_wheelhouse,
              "sglang/transformers wheels (tests/test_wheel_flags.py, test_wheel_registry.py)": sglang_wheels,
              "Debian packages (scripts/setup, the lab's base rootfs and apt repo)": debian,
              "project venv (scripts/setup, requirements-dev.lock)": project_venv}
    figures = {}
    for name, fn in pieces.items():
        figures[name] = got = fn()
        b = got.get("bytes")
        print(f"{name}: {'?' if b is None else mb(b)}")
        for k, v in got.items():
            if k != "bytes":
                print(f"    {k}: {mb(v) if k.endswith('bytes') and isinstance(v, int) else v}")
    known = sum(f["bytes"] or 0 for f in figures.values())
    print(f"total of the pieces: {mb(known)} (uv's and pip's index pages and the pin-set tests' lock "
          "metadata not counted; scripts/prove-fresh prints the whole)")
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
