"""Assemble the lab shape rtx-pro-6000-x8 from the real 6-GPU recording.

No public 8x RTX PRO 6000 Blackwell Workstation table was found, so this shape
is built, not recorded: the header and column lines are the real ones of
rtx-pro-6000-x6-editions (driver 590.48.01, CUDA 13.1); each of the eight GPU
blocks is that recording's GPU 4 block (a Max-Q Workstation Edition card,
97887 MiB) with only the index and the PCI bus id changed; the bus ids are
invented; the process table is replaced by the "No running processes found"
table of the real h200-x1 recording. query-gpu.csv is written in the exact
format of the real h200-x1 query (same header), with names from the
6-GPU recording's own `--query-gpu=index,name` output, compute capability 12.0
(NVIDIA's CUDA GPUs table), MIG "[N/A]" as the table shows, and invented UUIDs.

Run from this folder: python3 assemble_rtx_pro_6000_x8.py
"""

from pathlib import Path

HERE = Path(__file__).parent
SOURCE = (HERE / "rtx-pro-6000-x6-editions" / "nvidia-smi.txt").read_text().split("\n")
H200 = (HERE / "h200-x1" / "nvidia-smi.txt").read_text().split("\n")
BUSES = ["16", "38", "49", "5A", "98", "B8", "C8", "D8"]
NAME = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"

head = SOURCE[: SOURCE.index(next(line for line in SOURCE if line.startswith("|=")) ) + 1]
start = next(i for i, line in enumerate(SOURCE) if line.startswith("|   4  "))
block = SOURCE[start : start + 4]                       # 3 lines + the border under them
processes = H200[H200.index("") :]                      # blank line, then the process table

out = list(head)
for i, bus in enumerate(BUSES):
    first = block[0].replace("|   4  ", f"|   {i}  ").replace("00000000:F4:00.0", f"00000000:{bus}:00.0")
    out += [first, *block[1:]]
out += processes
dest = HERE / "rtx-pro-6000-x8"
dest.mkdir(exist_ok=True)
(dest / "nvidia-smi.txt").write_text("\n".join(out))

args = (HERE / "h200-x1" / "query-gpu.args").read_text()
header = (HERE / "h200-x1" / "query-gpu.csv").read_text().split("\n")[0]
rows = [f"{i}, {NAME}, 97887, 12.0, 00000000:{bus}:00.0, [N/A], GPU-00000000-0000-4000-8000-00000000000{i}, 590.48.01"
        for i, bus in enumerate(BUSES)]
(dest / "query-gpu.csv").write_text("\n".join([header, *rows]) + "\n")
(dest / "query-gpu.args").write_text(args)
