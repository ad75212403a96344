"""Which of a judge environment's packages sglang's argument checks need: measured, per pin set.

    GPUNODE_JUDGE_IMPORTS=/tmp/judge-imports GPUNODE_JUDGE_RECORD=1 .venv/bin/pytest tests/test_sglang_judge.py
    .venv/bin/python bench/judge_imports.py /tmp/judge-imports           # what each pin set's checks used
    .venv/bin/python bench/judge_imports.py /tmp/judge-imports --write   # keep it: compat/derived/judge-packages.yml

With GPUNODE_JUDGE_IMPORTS set, every judge process (gpunode/judge/child.py) writes the files of
its pin set's packages it imported and the distributions whose metadata it read. Here each file is
mapped to the distribution that installed it (the RECORD of each .dist-info in the site folder),
so each pin set's list is the distributions whose code ran or whose metadata was read while every
plan and derived case of the test was judged. gpunode/judge/env.py installs only those; a plan that
needs one more fails the judge with ModuleNotFoundError ("not runnable"), and the list is measured
again. --write keeps the lists; the sizes printed are what the site folder holds per distribution.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILE = REPO / "src/gpunode/compat/derived/judge-packages.yml"


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def owners(site: Path) -> tuple[dict[str, str], dict[str, int]]:
    """file (absolute) -> distribution, and each distribution's installed bytes."""
    out: dict[str, str] = {}
    sizes: dict[str, int] = defaultdict(int)
    for info in site.glob("*.dist-info"):
        name = normal(info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        record = info / "RECORD"
        if not record.exists():
            continue
        for row in csv.reader(record.read_text().splitlines()):
            if row:
                path = (site / row[0]).resolve()
                out[str(path)] = name
                if len(row) > 2 and row[2].isdigit():
                    sizes[name] += int(row[2])
    return out, sizes


def measure(folder: Path) -> dict[str, dict]:
    by_site: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"files": set(), "metadata": set()})
    for part in folder.glob("*.json"):
        d = json.loads(part.read_text())
        by_site[d["site"]]["files"].update(d["files"])
        by_site[d["site"]]["metadata"].update(normal(m) for m in d["metadata"])
    out = {}
    for site, seen in sorted(by_site.items()):
        files, sizes = owners(Path(site))
        used = {files[str(Path(f).resolve())] for f in seen["files"] if str(Path(f).resolve()) in files}
        used |= seen["metadata"] & set(sizes)
        pinset = Path(site).name.rsplit("-", 1)[0]
        out[pinset] = {"packages": sorted(used), "bytes": sum(sizes[n] for n in used),
                       "all": len(sizes), "all_bytes": sum(sizes.values())}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    got = measure(a.folder)
    if not got:
        print(f"no measurements in {a.folder}", file=sys.stderr)
        return 1
    for pinset, m in got.items():
        print(f"{pinset}: {len(m['packages'])} of {m['all']} packages used, {m['bytes'] / 1e6:.0f} of "
              f"{m['all_bytes'] / 1e6:.0f} MB installed")
    if a.write:
        import yaml

        head = ("# Measured by bench/judge_imports.py: per pin set lock, the packages whose code sglang's argument\n"
                "# checks imported or whose metadata they read, over every case of tests/test_sglang_judge.py.\n"
                "# gpunode/judge/env.py installs only these into the judge environment (the rest of the lock is\n"
                f"# never used there). Measured {time.strftime('%Y-%m-%d', time.gmtime())}.\n")
        data = {p: m["packages"] for p, m in got.items()}
        FILE.write_text(head + yaml.safe_dump(data, sort_keys=True))
        print(f"wrote {FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
