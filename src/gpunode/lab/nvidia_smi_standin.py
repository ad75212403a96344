#!/usr/bin/python3 -IS
# STAND-IN for NVIDIA's `nvidia-smi`, installed by the gpunode lab at /usr/bin/nvidia-smi in
# the "gpu" container (201). There is no GPU here: this program only REPLAYS outputs recorded
# on real machines. The recorded "shape" is bind-mounted read-only at /mnt/lab/nvidia-smi
# (host: /var/lib/gpunode-lab/share/nvidia-smi, filled from tests/data/nvidia-smi/<shape>/):
#
#   nvidia-smi.txt                  printed for `nvidia-smi` (no arguments)
#   nvidia-smi-q.txt                printed for `nvidia-smi -q` (optional)
#   query-gpu.csv + query-gpu.args  the csv is printed when argv equals the recorded arguments
#                                   (.args: one shell-quoted line, or one argument per line;
#                                   any other NAME.args + NAME.csv pair works the same way)
#
# Anything else fails like nvidia-smi does for arguments it cannot serve: a message on
# stderr and a non-zero exit (2, "invalid argument"; 9 when no recording is mounted, like a
# missing driver).

import os
import sys

SHAPE_DIR = "/mnt/lab/nvidia-smi"


def read(name):
    with open(os.path.join(SHAPE_DIR, name), "rb") as f:
        return f.read()


def split_args(line):
    import shlex

    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def main(argv):
    try:
        names = set(os.listdir(SHAPE_DIR))
    except OSError:
        names = set()
    if "nvidia-smi.txt" not in names:
        sys.stderr.write(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
            f"(gpunode lab stand-in: no nvidia-smi recording is mounted at {SHAPE_DIR}; choose one with "
            "`inv lab.up --gpu-shape NAME`, recordings live in tests/data/nvidia-smi/)\n"
        )
        return 9
    if not argv:
        sys.stdout.buffer.write(read("nvidia-smi.txt"))
        return 0
    if argv == ["-q"] and "nvidia-smi-q.txt" in names:
        sys.stdout.buffer.write(read("nvidia-smi-q.txt"))
        return 0
    for name in sorted(names):
        if not name.endswith(".args"):
            continue
        stem = name[: -len(".args")]
        data = [d for d in (stem + ".csv", stem + ".txt") if d in names]
        if not data:
            continue
        text = read(name).decode("utf-8", "replace").strip()
        one_per_line = [a.strip() for a in text.splitlines() if a.strip()]
        if argv in (split_args(text), one_per_line) or " ".join(argv) == text:
            sys.stdout.buffer.write(read(data[0]))
            return 0
    shape = ""
    if ".lab-shape" in names:
        shape = read(".lab-shape").decode("utf-8", "replace").strip()
    recorded = ["(no arguments)"] + (["-q"] if "nvidia-smi-q.txt" in names else [])
    recorded += [" ".join(read(n).decode("utf-8", "replace").split()) for n in sorted(names) if n.endswith(".args")]
    sys.stderr.write(
        "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
        "(gpunode lab stand-in: no recording of `nvidia-smi {}` in shape {}; recorded: {})\n".format(
            " ".join(argv), shape or "?", "; ".join(recorded)
        )
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
