"""Model weights staged into memory (/dev/shm), verified and resumable.

The copying is done on the target by templates/weights/stage-weights.sh (the
same script the boot-time oneshot unit runs after /dev/shm was emptied by a
reboot), so the step only decides whether staging is needed and whether it
can fit, then streams the script's progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode import shell
from gpunode.errors import StepError
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Probe, Step, run_all
from gpunode.steps.progress import Line, Progress, ProgressSink
from gpunode.steps.reads import FileRead
from gpunode.transport.base import Transport

STAGE_SCRIPT = "/usr/local/lib/gpunode/stage-weights.sh"

# weights_probe.sh: one find over the source and the staged copy (each line starts with its folder,
# %H), sorted here; the rest is the shell's own work but the manifest's cat and df: no sort, tail or
# dirname, and only gn_* variables, so that the batch runs it as a function call (FileRead.inline).
# The memory bound comes from the facts (System.memory_bound), read in the same round trip.
# -L: links in the source are the files they point to, as the facts' listing and the servers see
# them (a Hugging Face cache snapshot is a folder of links into blobs/); the copy holds files.
# @@work: the script's work folder is beside the copy, so a run was cut after its last rename and
# before its end; the copy is not called staged until a run has removed it.
_PROBE = shell.script("gpunode.steps", "weights_probe.sh")
_CAT = '[ ! -f "$gn_dest/.gpunode-manifest" ] || cat "$gn_dest/.gpunode-manifest"\n'
# Before the manifest's cat (found, work), and after it (the df of where the copy goes).
_HEAD, _TAIL = _PROBE.split(_CAT)
# Where the facts already say how much room there is (/dev/shm: their one df), the probe runs no df.
_PROBE_KNOWN = _HEAD + _CAT
#: In the batch, the manifest is read by one process with the venvs' (steps/reads.py), and what
#: is left runs in the batch's own shell, as a function call: no fork (engine/inline.py).
READS = (FileRead(_PROBE, _HEAD + _TAIL, 1, ".gpunode-manifest", "@@section manifest\n", inline=True),
         FileRead(_PROBE_KNOWN, _HEAD, 1, ".gpunode-manifest", "@@section manifest\n", inline=True))


def stage_args(source: str, dest: str, skip: tuple[str, ...]) -> list[str]:
    """stage-weights.sh's arguments but the checksum word: one `-x PATH` per file left out."""
    return [*(arg for path in skip for arg in ("-x", path)), source, dest]


def _c_sorted(lines: list[str]) -> list[str]:
    """In the order of `LC_ALL=C sort` (bytes), as stage-weights.sh writes the manifest."""
    return sorted(lines, key=lambda line: line.encode("utf-8", "surrogateescape"))


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@section "):
            current = line.split(" ", 1)[1]
            out[current] = []
        elif current is not None and line:
            out[current].append(line)
    return out


@dataclass
class StagedWeights(Step):
    """A model folder copied from `source` to `dest` (normally /dev/shm/<model>).

    + source: folder on the target (a host path mounted into the container, or local)
    + dest: where the servers load from
    + verify: "" (sizes, always) or "sha256" (checksums while copying)
    + reserve_bytes: memory the servers need beside the weights, for the preflight
    + memory: (bytes, what) the weights and the servers share (facts' System.memory_bound), or None
    + space: (free, size) in bytes of the file system `dest` goes to, when the facts know it (their
      /dev/shm); None: the probe asks df
    + skip: files of `source` (relative paths) left out: other copies of the weights that the servers
      do not load (facts/served.py); the script gets each as `-x PATH`
    """

    source: str
    dest: str
    verify: str = ""
    reserve_bytes: int = 0
    memory: tuple[int, str] | None = None
    space: tuple[int, int] | None = None
    skip: tuple[str, ...] = ()
    script: str = STAGE_SCRIPT
    on_progress: Progress | None = field(default=None, repr=False, compare=False)
    on_line: Line | None = field(default=None, repr=False, compare=False)  # the script's other lines (-v)

    @property
    def id(self) -> str:
        return f"weights:{self.dest}"

    def probe(self) -> list[str]:
        return shell.sh(_PROBE if self.space is None else _PROBE_KNOWN, self.source, self.dest)

    def batched(self) -> Batched:
        return READS[self.space is not None].batched(self.source, self.dest)

    def check(self, probe: Probe) -> Outcome:
        s = _sections(probe.output)
        found = s.get("found", [])
        if found == ["@@missing"]:
            raise StepError(f"model source folder {self.source} does not exist on the target",
                            hint="check model_source in the inventory, and that the host folder is mounted "
                            "into the container (a Proxmox mpN: entry)")
        rows = [line.split("\t") for line in found if line.count("\t") == 3]
        # The source's own files (the engine's .gpunode-* bookkeeping left out) as "path, size, mtime".
        skip = set(self.skip)
        source = _c_sorted(["\t".join(r[1:]) for r in rows if r[0] == self.source and r[1] not in skip
                            and not r[1].rsplit("/", 1)[-1].startswith(".gpunode-")])
        if not source:
            raise StepError(f"model source folder {self.source} is empty", hint="point model_source at the model")
        files = [line.split("\t") for line in source]
        total = sum(int(f[1]) for f in files)
        staged = {r[1]: r[2] for r in rows if r[0] == self.dest}
        left = f"; {len(skip)} other copies of the weights left out" if skip else ""
        cut = "@@work" in found
        if not cut and s.get("manifest", []) == source and all(staged.get(f[0]) == f[1] for f in files):
            return NoChange(f"{len(files)} files ({human(total)}) already staged in {self.dest}, "
                            f"sizes match the source manifest{left}")
        done = sum(int(f[1]) for f in files if staged.get(f[0]) == f[1])
        partial = sum(int(v) for k, v in staged.items() if k.endswith(".gpunode-part"))
        need = total - done - partial
        self._preflight(s, total, need)
        resume = f"; resuming, {human(done + partial)} already there" if done + partial else ""
        work = "; a cut run's work folder is left beside it" if cut else ""
        return Change(f"stage {len(files)} files ({human(total)}) from {self.source} into {self.dest}"
                      f"{resume}{work}{left}")

    def _preflight(self, s: dict[str, list[str]], total: int, need: int) -> None:
        if self.space is not None:
            avail, size = self.space
        else:
            space = (s.get("space") or ["0 0"])[-1].split()  # df's last line: its first is the header
            avail, size = int(space[0]), int(space[1])
        if need > avail:
            raise StepError(
                f"{self.dest} has {human(avail)} free of {human(size)}, but the model needs {human(need)} more "
                f"({human(total)} in all)",
                hint="/dev/shm is a tmpfs: free space there, or give the container more memory "
                "(Proxmox: pct set <vmid> --memory <MiB>); its size defaults to half the memory",
            )
        if self.memory is not None and total + self.reserve_bytes > self.memory[0]:
            limit, what = self.memory
            raise StepError(
                f"{what} ({human(limit)}) cannot hold the staged model "
                f"({human(total)}) next to the servers ({human(self.reserve_bytes)}): /dev/shm counts "
                "against that limit",
                hint="raise the container's memory (pct set <vmid> --memory <MiB>) or load the model "
                "from disk instead of /dev/shm (weights_stage: false)",
            )

    def commands(self) -> list[Command]:
        return [Command(("sh", self.script, *stage_args(self.source, self.dest, self.skip),
                         *([self.verify] if self.verify else [])),
                        f"staging {self.source} into {self.dest}",
                        failure=f"staging {self.source} into {self.dest} failed",
                        hint="re-run: staging resumes from the last complete chunk", watched=True)]

    def apply(self, target: Transport) -> None:
        # The script's @@progress lines (bytes copied) stream into the sink as it copies.
        run_all(self.commands(), target, ProgressSink(self.on_progress, self.on_line))
