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
from gpunode.roles.servers import role as servers_role
from gpunode.steps.files import File, Template
from tests.unit import systemd_parse

DATA = Path(__file__).resolve().parents[1] / "data" / "device" / "h100-serve"
# case: (facts snapshot, model folder there, the inventory variables beyond the pin set)
CASES = {"dense": ("facts-dense", "tiny-qwen3", {}),
         "hybrid": ("facts-hybrid", "tiny-qwen36", {}),
         "hybrid-no-buffer": ("facts-hybrid", "tiny-qwen36", {"mamba_strategy": "no_buffer"})}


def recorded(case: str) -> dict:
    return json.loads((DATA / f"serve-{case}.json").read_text())


def rendered(case: str) -> tuple[list[str], dict[str, str]]:
    folder, model, extra = CASES[case]
    facts = parse(snapshot.load(DATA / folder))
    # The proof's servers loaded the source folder, not the staged copy: it resolved without the
    # model_path that provisioning took from the weights then (now the plan's weights.dest).
    v = {**roles.defaults(), "pinset": "cu13-b", "model_source": f"/root/proof/models/{model}",
         "model_path": f"/root/proof/models/{model}", "servers_router": False, **extra}
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


# Cache folders the servers' env gained after this run (issue 34, item 4: torch.compile's, CuTe DSL's and
# quack's caches were in /tmp, others in /root; tests/data/jit-caches/README.md). Each is a folder under
# the proven cuda_jit_cache, not yet proven by a start here: serve_proof.py records them when it runs again.
CACHES_SINCE = ("TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "SGLANG_CACHE_DIR", "SGLANG_DG_CACHE_DIR",
                "CUTE_DSL_CACHE_DIR", "QUACK_CACHE_DIR", "TILELANG_CACHE_DIR")


@pytest.mark.parametrize("case", sorted(CASES))
def test_today_renders_the_command_line_and_environment_proven_there(case):
    argv, env = rendered(case)
    rec = recorded(case)
    assert argv == left_to_sglang(rec["argv"], argv, rec["server_args"])
    assert {k: v for k, v in env.items() if k not in CACHES_SINCE or k in rec["env"]} == rec["env"]
    cache = rec["env"]["XDG_CACHE_HOME"]
    assert all(env[k].startswith(cache + "/") for k in CACHES_SINCE if k not in rec["env"])


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
