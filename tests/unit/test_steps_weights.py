"""StagedWeights against real folders through the local transport."""

import os
from pathlib import Path

import pytest

from gpunode.engine import probe
from gpunode.errors import StepError
from gpunode.facts.types import System
from gpunode.steps import render
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.weights import StagedWeights
from gpunode.transport import LocalTransport

SCRIPT = str(render.find("weights/stage-weights.sh"))


def _model(root: Path) -> Path:
    src = root / "src"
    (src / "tok").mkdir(parents=True)
    (src / "model-00001-of-00002.safetensors").write_bytes(os.urandom(9_000_000))
    (src / "model-00002-of-00002.safetensors").write_bytes(os.urandom(3_000_000))
    (src / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (src / "tok" / "tokenizer.json").write_text("{}")
    return src


def _check(step, t):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout))


def test_stage_then_noop_with_reason(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    seen = []
    step = StagedWeights(source=str(src), dest=str(tmp_path / "shm" / "m"), script=SCRIPT,
                         on_progress=lambda done, total, name: seen.append((done, total)))
    first = _check(step, t)
    assert isinstance(first, Change) and first.summary.startswith("stage 4 files")
    step.apply(t)
    assert seen and seen[-1][0] == seen[-1][1] == 12_000_000 + len('{"architectures": ["Qwen3ForCausalLM"]}') + 2
    for f in src.rglob("*"):
        if f.is_file():
            assert (tmp_path / "shm" / "m" / f.relative_to(src)).read_bytes() == f.read_bytes()
    again = _check(step, t)
    assert isinstance(again, NoChange)
    assert again.reason.startswith("4 files (11.4 MiB) already staged in ")
    assert again.reason.endswith("sizes match the source manifest")


def test_interrupted_copy_resumes_and_never_exposes_a_partial_file(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    dest = tmp_path / "shm" / "m"
    dest.mkdir(parents=True)
    big = "model-00001-of-00002.safetensors"
    # What a cut connection leaves behind: a part file of 5 MB and no manifest.
    (dest / (big + ".gpunode-part")).write_bytes((src / big).read_bytes()[:5_000_000])
    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    plan = _check(step, t)
    assert isinstance(plan, Change) and "resuming, 4.8 MiB already there" in plan.summary
    step.apply(t)
    assert (dest / big).read_bytes() == (src / big).read_bytes()
    assert not list(dest.rglob("*.gpunode-part"))


def test_resume_keeps_whole_blocks_of_the_part_file(tmp_path):
    # A part file whose first block differs from the source shows that the copy
    # resumed after it instead of starting over; sha256 mode catches exactly that.
    t = LocalTransport()
    src = _model(tmp_path)
    dest = tmp_path / "d"
    dest.mkdir()
    big = "model-00001-of-00002.safetensors"
    marker = b"\xab" * 4_194_304
    (dest / (big + ".gpunode-part")).write_bytes(marker + b"\x00" * 10)
    StagedWeights(source=str(src), dest=str(dest), script=SCRIPT).apply(t)
    data = (dest / big).read_bytes()
    assert data[:4_194_304] == marker and data[4_194_304:] == (src / big).read_bytes()[4_194_304:]

    (dest / big).unlink()
    (dest / (big + ".gpunode-part")).write_bytes(marker)
    checked = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT, verify="sha256")
    with pytest.raises(StepError) as err:
        checked.apply(t)
    assert f"checksum mismatch on {big}; copy removed" in str(err.value)
    assert not (dest / big).exists() and not (dest / (big + ".gpunode-part")).exists()
    checked.apply(t)
    assert (dest / big).read_bytes() == (src / big).read_bytes()


def test_changed_source_file_is_copied_again(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    step = StagedWeights(source=str(src), dest=str(tmp_path / "d"), script=SCRIPT)
    step.apply(t)
    (src / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "x": 1}')
    assert isinstance(_check(step, t), Change)
    step.apply(t)
    assert (tmp_path / "d" / "config.json").read_text().endswith('"x": 1}')
    assert isinstance(_check(step, t), NoChange)


def test_missing_source_is_a_clear_error(tmp_path):
    step = StagedWeights(source=str(tmp_path / "nope"), dest=str(tmp_path / "d"), script=SCRIPT)
    with pytest.raises(StepError, match=r"model source folder .*/nope does not exist on the target"):
        _check(step, LocalTransport())


def _probe(avail: int) -> Probe:
    # df prints a header line first (`df -B1 --output=avail,size`)
    out = ("@@section found\n/mnt/models/q\tmodel.safetensors\t53687091200\t1.0\n@@section manifest\n"
           f"@@section space\n    Avail 1B-blocks\n{avail} {avail}\n")
    return Probe(0, out)


def test_shm_too_small_refuses_before_copying():
    step = StagedWeights(source="/mnt/models/q", dest="/dev/shm/q")
    with pytest.raises(StepError, match=r"/dev/shm/q has 32.0 GiB free of 32.0 GiB, but the model needs 50.0 GiB"):
        step.check(_probe(32 << 30))


def test_with_the_room_from_the_facts_the_probe_asks_no_df_and_the_refusal_is_the_same():
    step = StagedWeights(source="/mnt/models/q", dest="/dev/shm/q", space=(32 << 30, 64 << 30))
    assert "df " not in step.probe()[2]
    found = "@@section found\n/mnt/models/q\tmodel.safetensors\t53687091200\t1.0\n@@section manifest\n"
    with pytest.raises(StepError, match=r"/dev/shm/q has 32.0 GiB free of 64.0 GiB, but the model needs 50.0 GiB"):
        step.check(Probe(0, found))
    roomy = StagedWeights(source="/mnt/models/q", dest="/dev/shm/q", space=(60 << 30, 64 << 30))
    assert roomy.check(Probe(0, found)).summary.startswith("stage 1 files (50.0 GiB)")


def test_memory_limit_counts_shm_and_servers():
    facts = System(mem_total_bytes=128 << 30, mem_limit_bytes=64 << 30)
    step = StagedWeights(source="/mnt/models/q", dest="/dev/shm/q", reserve_bytes=16 << 30,
                         memory=facts.memory_bound())
    with pytest.raises(StepError, match=r"memory limit \(64.0 GiB\) cannot hold the staged model \(50.0 GiB\) "
                                        r"next to the servers \(16.0 GiB\)"):
        step.check(_probe(100 << 30))


def test_without_a_cgroup_limit_memtotal_bounds_the_staging():
    """A Proxmox guest's cgroup root reads "max" (its limit is on lxc/<vmid>); lxcfs shows that limit
    as MemTotal, which then bounds /dev/shm and the servers."""
    def step(**memory: int) -> StagedWeights:
        return StagedWeights(source="/mnt/models/q", dest="/dev/shm/q", reserve_bytes=16 << 30,
                             memory=System(**memory).memory_bound())

    with pytest.raises(StepError, match=r"the target's memory \(MemTotal\) \(60.0 GiB\) cannot hold the staged "
                                        r"model \(50.0 GiB\) next to the servers \(16.0 GiB\)"):
        step(mem_total_bytes=60 << 30).check(_probe(100 << 30))
    with pytest.raises(StepError, match=r"the container's memory limit \(64.0 GiB\)"):  # the smaller of the two
        step(mem_total_bytes=128 << 30, mem_limit_bytes=64 << 30).check(_probe(100 << 30))
    assert step(mem_total_bytes=128 << 30).check(_probe(100 << 30)).summary.startswith("stage 1 files")


def test_drift_through_the_batch_a_truncated_shard_or_a_deleted_file_restages(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    step = StagedWeights(source=str(src), dest=str(tmp_path / "shm" / "m"), script=SCRIPT)
    step.apply(t)
    [same] = probe.run_batch(t, [step.probe()])
    assert isinstance(step.check(same), NoChange)
    shard = tmp_path / "shm" / "m" / "model-00001-of-00002.safetensors"
    with shard.open("r+b") as f:
        f.truncate(4_000_000)  # a shard cut short (a full /dev/shm, a hand edit)
    [cut] = probe.run_batch(t, [step.probe()])
    change = step.check(cut)
    assert isinstance(change, Change) and change.summary.startswith("stage 4 files")
    assert "resuming, 2.9 MiB already there" in change.summary  # the other three files count as staged
    step.apply(t)
    assert isinstance(step.check(probe.run_batch(t, [step.probe()])[0]), NoChange)
    (tmp_path / "shm" / "m" / "tok" / "tokenizer.json").unlink()
    assert isinstance(step.check(probe.run_batch(t, [step.probe()])[0]), Change)


def test_a_new_source_file_is_drift_and_the_engine_files_in_the_source_are_not(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    step = StagedWeights(source=str(src), dest=str(tmp_path / "shm" / "m"), script=SCRIPT)
    step.apply(t)
    (src / ".gpunode-note").write_text("x")  # ! -name '.gpunode-*' in the source, as stage-weights.sh lists it
    assert isinstance(_check(step, t), NoChange)
    (src / "extra.json").write_text("{}")
    assert isinstance(_check(step, t), Change)


def _programs(t, step, tmp_path) -> tuple[list[str], str]:
    """The programs the step's probe starts in a batch (successful execve), and its answer."""
    log = tmp_path / "execve.log"
    nonce = "gpunode-0123456789abcdef"
    out = t.run(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(log), "sh", "-s"],
                stdin=probe.build([step.probe()], nonce).encode(), check=True).stdout
    started = [line.split('execve("', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1]
               for line in log.read_text().splitlines() if "execve(" in line and line.rstrip().endswith("= 0")]
    return started, step.check(probe.parse(out, 1, nonce)[0])


def test_the_probe_starts_no_program_but_find_cat_and_df(tmp_path):
    t = LocalTransport()
    src = _model(tmp_path)
    step = StagedWeights(source=str(src), dest=str(tmp_path / "shm" / "m"), script=SCRIPT)
    step.apply(t)
    started, outcome = _programs(t, step, tmp_path)
    assert isinstance(outcome, NoChange) and started == ["sh", "find", "cat", "df"], started
    # With the room known from the facts (their df of /dev/shm), no df of its own; the same answer.
    known = StagedWeights(source=str(src), dest=str(tmp_path / "shm" / "m"), script=SCRIPT, space=(1 << 30, 1 << 30))
    started, outcome = _programs(t, known, tmp_path)
    assert isinstance(outcome, NoChange) and started == ["sh", "find", "cat"], started



def test_the_weights_role_takes_the_room_in_dev_shm_from_the_facts_and_asks_df_elsewhere():
    from dataclasses import replace

    from gpunode import roles
    from gpunode.resolve import resolve
    from gpunode.roles.context import RoleContext
    from tests.unit.resolve_facts import field_notes

    weights_role = roles.module("weights")

    facts = field_notes()
    facts = replace(facts, system=replace(facts.system, shm_size_bytes=64 << 30, shm_free_bytes=40 << 30))

    def staged(**sets) -> StagedWeights:
        v = {**roles.defaults(), "model_source": "/mnt/models/Qwen3.6-27B", **sets}
        ctx = RoleContext(target="kpro6/200", vars=v, facts=facts, plan=resolve(facts, v))
        [plan] = weights_role.build(ctx)
        return next(s for s in plan.steps if isinstance(s, StagedWeights))

    assert staged().space == (40 << 30, 64 << 30) and "df " not in staged().probe()[2]
    elsewhere = staged(weights_dest_root="/var/cache/models")
    assert elsewhere.space is None and "df -B1" in elsewhere.probe()[2]


def test_a_hugging_face_cache_snapshot_of_links_to_blobs_is_staged_as_files(tmp_path):
    """huggingface_hub's cache keeps each file once in blobs/ and makes snapshots/<revision>/ of
    relative links to them (https://huggingface.co/docs/huggingface_hub/guides/manage-cache): a
    model_source there is staged as the files the links point to, and the re-run is a no-op."""
    t = LocalTransport()
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-8B"
    snapshot = repo / "snapshots" / "9c925d64d72725edaf899c6cb9c377fd0709d9c5"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    files = {"config.json": b'{"architectures": ["Qwen3ForCausalLM"]}',
             "model.safetensors": os.urandom(5_000_000)}
    for i, (name, data) in enumerate(files.items()):
        (repo / "blobs" / f"blob{i}").write_bytes(data)
        (snapshot / name).symlink_to(f"../../blobs/blob{i}")
    dest = tmp_path / "shm" / "m"
    step = StagedWeights(source=str(snapshot), dest=str(dest), script=SCRIPT)
    first = _check(step, t)
    assert isinstance(first, Change) and first.summary.startswith("stage 2 files"), first
    step.apply(t)
    for name, data in files.items():
        assert not (dest / name).is_symlink() and (dest / name).read_bytes() == data
    assert isinstance(_check(step, t), NoChange)


def test_other_copies_of_the_weights_are_not_staged_and_the_boot_unit_leaves_them_out_too(tmp_path):
    """A whole gpt-oss download holds its weights three times (facts/served.py): only the copy the
    servers load goes into memory, by the step and by the unit that stages again after a reboot."""
    from dataclasses import replace

    from gpunode import roles
    from gpunode.resolve import resolve
    from gpunode.roles.context import RoleContext
    from gpunode.steps.files import Template
    from tests.unit.resolve_facts import field_notes

    servers_role, weights_role = roles.module("servers"), roles.module("weights")

    t = LocalTransport()
    src = tmp_path / "gpt-oss-20b"
    for name, size in (("model-00000-of-00002.safetensors", 3_000_000), ("config.json", 40),
                       ("metal/model.bin", 2_000_000), ("original/model.safetensors", 2_000_000),
                       ("original/config.json", 30)):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(os.urandom(size))
    skip = ("metal/model.bin", "original/model.safetensors")
    dest = tmp_path / "shm" / "gpt-oss-20b"
    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT, skip=skip)
    first = _check(step, t)
    assert isinstance(first, Change) and first.summary.startswith("stage 3 files"), first
    assert first.summary.endswith("2 other copies of the weights left out")
    step.apply(t)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if not p.name.startswith(".gpunode")
                  and p.is_file()) == ["config.json", "model-00000-of-00002.safetensors", "original/config.json"]
    assert isinstance(_check(step, t), NoChange)

    facts = field_notes()
    facts = replace(facts, model=replace(facts.model, unserved=skip))
    v = {**roles.defaults(), "model_source": "/mnt/models/gpt-oss-20b"}
    ctx = RoleContext(target="kpro6/200", vars=v, facts=facts, plan=resolve(facts, v))
    [plan] = weights_role.build(ctx)
    assert next(s for s in plan.steps if isinstance(s, StagedWeights)).skip == skip
    unit = next(s for p in servers_role.build(ctx) for s in p.steps
                if isinstance(s, Template) and s.path.endswith("gpunode-stage-weights.service"))
    assert " -x metal/model.bin -x original/model.safetensors /mnt/models/gpt-oss-20b " in unit.vars["exec_start"]
