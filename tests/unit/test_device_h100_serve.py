"""The server units as they started and served on a real H100 (tests/data/device/h100-serve/README.md).

Today's code, given that machine's recorded facts and the same variables, must render the very
command lines that were proven there: a flag change fails here until it is proven again
(tests/device/serve_proof.py). The recorded run itself must show what it is cited for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode import roles
from gpunode.facts import snapshot
from gpunode.facts.parse import parse
from gpunode.resolve import resolve
from gpunode.steps.files import File, Template
from tests.unit import systemd_parse

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
servers_role = roles.module("servers")

DATA = Path(__file__).resolve().parents[1] / "data" / "device" / "h100-serve"
# case: (facts snapshot, model folder there, the inventory variables beyond the pin set)
CASES = {"dense": ("facts-dense", "tiny-qwen3", {}),
         "hybrid": ("facts-hybrid", "tiny-qwen36", {}),
         "hybrid-no-buffer": ("facts-hybrid", "tiny-qwen36", {"mamba_strategy": "no_buffer"})}


def recorded(case: str) -> dict:
    return json.loads((DATA / f"serve-{case}.json").read_text())


def latest() -> dict:
    """The second run there: the dense unit as a node runs it, started cold, warm, after a reboot's
    losses and after an unrelated upgrade (README: "Second run")."""
    return json.loads((DATA / "restarts-dense.json").read_text())


def rendered(case: str, staged: bool = False) -> tuple[list[str], dict[str, str]]:
    folder, model, extra = CASES[case]
    facts = parse(snapshot.load(DATA / folder))
    # The first run's servers loaded the source folder, not the staged copy: it resolved without the
    # model_path that provisioning took from the weights then (now the plan's weights.dest). The
    # second run (staged) loaded the copy, as a node does.
    source = f"/root/proof/models/{model}"
    v = {**roles.defaults(), "pinset": "cu13-b", "model_source": source,
         **({} if staged else {"model_path": source}), "servers_router": False, **extra}
    ctx = roles.RoleContext(target="h100", vars=v, facts=facts, plan=resolve(facts, v))
    steps = {s.id: s for plan in servers_role.build(ctx) for s in plan.steps}
    unit = steps["file:/etc/systemd/system/gpunode-gpu0.service"]
    env_file = steps["file:/etc/gpunode/gpu0.env"]
    assert isinstance(unit, Template) and isinstance(env_file, File)
    env = systemd_parse.env_file(str(env_file.content))
    exec_start = next(v for _, k, v in systemd_parse.settings(unit.content) if k == "ExecStart")
    return systemd_parse.exec_words(exec_start, env=env), env


def test_the_facts_are_that_h100():
    facts = parse(snapshot.load(DATA / "facts-dense"))
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.compute_cap, facts.driver.version) == ("NVIDIA H100 80GB HBM3", "9.0", "580.159.04")
    hybrid = parse(snapshot.load(DATA / "facts-hybrid")).model
    assert hybrid is not None and hybrid.architectures == ("Qwen3_5ForConditionalGeneration",)
    assert hybrid.hybrid_linear_attention


def left_to_sglang(proven: list[str], today: list[str], server_args: list[str]) -> list[str]:
    """The proven command line less the flags today's plan leaves to SGLang, where SGLang's own
    reading at every start (its server_args line) shows it ran with that very value: passing it
    or not starts the same server. Any other difference stays a difference."""
    out = list(proven)
    for flag, field in (("--attention-backend", "attention_backend"),):
        if flag in out and flag not in today:
            value = out[out.index(flag) + 1]
            if server_args and all(f"{field}='{value}'" in line for line in server_args):
                del out[out.index(flag):out.index(flag) + 2]
    return out


# Cache folders the servers' env gained after the first run (issue 34, item 4: torch.compile's, CuTe DSL's
# and quack's caches were in /tmp, others in /root; tests/data/jit-caches/README.md). The second run
# started the dense unit with them; the hybrid units must carry the very values it ran with.
CACHES_SINCE = ("TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "SGLANG_CACHE_DIR", "SGLANG_DG_CACHE_DIR",
                "CUTE_DSL_CACHE_DIR", "QUACK_CACHE_DIR", "TILELANG_CACHE_DIR")


@pytest.mark.parametrize("case", sorted(CASES))
def test_today_renders_the_command_line_and_environment_proven_there(case):
    argv, env = rendered(case)
    rec = recorded(case)
    assert argv == left_to_sglang(rec["argv"], argv, rec["server_args"])
    assert {k: v for k, v in env.items() if k not in CACHES_SINCE or k in rec["env"]} == rec["env"]
    proven = latest()["env"]
    assert all(env[k] == proven[k] for k in CACHES_SINCE if k not in rec["env"])


def test_today_renders_exactly_the_unit_of_the_latest_run():
    argv, env = rendered("dense", staged=True)
    rec = latest()
    assert argv == rec["argv"] and env == rec["env"]
    assert rec["argv"][rec["argv"].index("--model-path") + 1].startswith("/dev/shm/")


def test_every_cache_the_first_start_filled_outlived_a_reboot_and_an_upgrade():
    rec = latest()
    cold, warm, rebooted, upgraded = rec["starts"]
    assert all(s["ok"] for s in rec["starts"]) and rec["requests"]["chat"]["ok"]
    assert rec["before"]["after-reboot"]["page_cache_dropped"]
    assert "/tmp/torchinductor_root" in rec["before"]["after-reboot"]["removed"]
    assert rec["before"]["after-unrelated-upgrade"]["rc"] == 0
    # warm means the compile work of the first start was not done again: within 1.5x of the warm start
    assert max(rebooted["ready_s"], upgraded["ready_s"]) < 1.5 * warm["ready_s"] < cold["ready_s"]
    cache, venv = rec["env"]["XDG_CACHE_HOME"], rec["argv"][0].rsplit("/bin/", 1)[0]
    written = rec["written_by_first_start"]
    assert written.get(cache, 0) > 1_000_000  # the compiled kernels
    # Everything else it wrote is bytecode (the venv, the stand-in's image site-packages), the pid file,
    # or the metrics' per-process files SGLang makes anew at each start: none of it a start needs again.
    for path in written:
        assert (path.startswith((cache, venv, "/opt/torch/.venv/lib", "/run/gpunode-shim/"))
                or (path.startswith("/tmp/tmp") and (path.endswith(".db") or written[path] == 0))), path


def test_only_a_flag_sglang_ran_with_anyway_may_be_left_out():
    proven = ["--model-path", "m", "--attention-backend", "fa3", "--port", "1"]
    today = ["--model-path", "m", "--port", "1"]
    assert left_to_sglang(proven, today, ["ServerArgs(attention_backend='fa3', x=1)"]) == today
    assert left_to_sglang(proven, today, ["ServerArgs(attention_backend='triton', x=1)"]) == proven
    assert left_to_sglang(proven, today, []) == proven


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_proven_unit_passed_ready_twice_answered_and_benched_without_errors(case):
    rec = recorded(case)
    assert [s["ok"] for s in rec["starts"]] == [True, True]
    assert rec["requests"]["completions"]["response"]["choices"][0]["text"]
    assert rec["requests"]["chat"]["ok"]
    runs = rec["bench"]["runs"]
    assert [r["concurrency"] for r in runs] == [1, 16, 64]
    assert all(r["total"]["errors"] == 0 and r["total"]["ok"] == r["total"]["requests"] for r in runs)


def test_no_buffer_brings_disable_overlap_schedule_and_sglang_ran_with_both():
    argv, _ = rendered("hybrid-no-buffer")
    assert argv[argv.index("--mamba-radix-cache-strategy") + 1] == "no_buffer"
    assert "--disable-overlap-schedule" in argv
    for line in recorded("hybrid-no-buffer")["server_args"]:  # SGLang's own reading, at each start
        assert "disable_overlap_schedule=True" in line and "mamba_radix_cache_strategy='no_buffer'" in line
    (auto, _) = recorded("hybrid")["server_args"]
    assert "mamba_radix_cache_strategy='extra_buffer'" in auto  # SGLang's own choice when gpunode sets none
    default, _ = rendered("hybrid")
    assert "--mamba-radix-cache-strategy" not in default and "--disable-overlap-schedule" not in default
