"""No inventory variable can add a line or a setting to a unit or env file (issue 12, High).

Newlines, CR, NUL, `%`, `$`, quotes, backslashes and a lone `;` are sent through every
variable that reaches a unit or env file, the way `inv provision` layers them
(role defaults < inventory < --set, then the registry's check (gpunode/variables.py)). Each value is
either refused with a message naming the variable, or the rendered files, read back
by systemd's rules (tests/unit/systemd_parse.py), hold exactly the settings they hold
with the defaults and carry the value as data. The facts are the recorded
debian12-cpu snapshot (see its README).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import pipeline, roles, variables
from gpunode.errors import GpunodeError
from gpunode.inventory import Host, Target
from gpunode.transport import LocalTransport
from gpunode_lab.roles.demo.role import DEFAULTS as DEMO_DEFAULTS
from gpunode_lab.roles.demo.role import role as demo_role
from tests import demo_role as demo_path
from tests.unit import systemd_parse

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "debian12-cpu"

SPECIALS = {
    "newline": "Q\n[Service]\nExecStartPre=/bin/touch /tmp/x\n[Unit]\n#",
    "cr": "Q\r[Service]\rExecStartPre=/bin/touch /tmp/x",
    "nul": "Q\x00x",
    "percent": "Q%h%n%%",
    "dollar": "Q$HOME${PATH}$$",
    "quotes": "Q\"double\" 'single'",
    "backslash": "Q\\n\\\\x",
    "trailing backslash": "Q\\",
    "semicolon": ";",
}
CONTROL = ("newline", "cr", "nul")

# variable -> how a special becomes its value
SERVERS_VARS = {
    "model_source": lambda s: f"/mnt/models/{s}",
    "weights_dest_root": lambda s: f"/dev/shm/{s}",
    "cuda_jit_cache": lambda s: f"/var/cache/{s}",
    "venv_root": lambda s: f"/opt/{s}",
    "servers_start_timeout": lambda s: s,
    "served_model_name": lambda s: s,
    "extra_args": lambda s: ["--x", s],
    "host": lambda s: s,
    "router_host": lambda s: s,
    "router_policy": lambda s: s,
}
DEMO_VARS = {
    "demo_etc": lambda s: f"/etc/{s}",
    "demo_root": lambda s: f"/srv/{s}",
    "demo_bind": lambda s: s,
    "demo_port": lambda s: s,
    "demo_greeting": lambda s: s,
    "demo_unit": lambda s: f"{s}.service",
}
# Values every variable of these kinds must take as data, so that refusing everything fails.
TAKES_AS_DATA = {"model_source", "weights_dest_root", "cuda_jit_cache", "served_model_name", "extra_args",
                 "demo_etc", "demo_root", "demo_greeting"}


def files_of(plans) -> dict[str, str]:
    out = {}
    for plan in plans:
        for step in plan.steps:
            step = getattr(step, "file", step)  # a Unit holds its File
            path = getattr(step, "path", "")
            if path.endswith((".service", ".env")) and getattr(step, "content", None) is not None:
                out[path] = step.content
    return out


def render(name: str, value) -> dict[str, str]:
    """The unit and env files `inv provision` would write, with one variable set by --set."""
    if name in DEMO_VARS:
        v = {**DEMO_DEFAULTS, name: value}
        with demo_path.on_path():  # a role of the lab's folder: its types and templates while it is there
            variables.check(v, {name: "--set"})
            return files_of([demo_role(v)])
    v = {**roles.defaults(), "model_source": "/mnt/models/tiny-qwen3", "engine": "vllm-cpu", name: value}
    origins = {name: "--set"}
    variables.check(v, origins)
    target = Target(Host(name="local", address="127.0.0.1", connection="local"), None, v, origins)
    job = pipeline.prepare(target, LocalTransport(), facts_dir=SNAPSHOT)
    return files_of(job.roles)


def shape(files: dict[str, str]) -> list[tuple]:
    """For every file, the (section, key) of each of its settings, in order: names aside."""
    out = []
    for path, text in files.items():
        if path.endswith(".env"):
            out.append(("env", tuple(systemd_parse.env_file(text))))
        else:
            out.append(("unit", tuple((s, k) for s, k, _ in systemd_parse.settings(text))))
    return sorted(out)


def data(files: dict[str, str]) -> list[str]:
    """Every value as systemd hands it on: argv words, env values, specifier-free settings."""
    out: list[str] = []
    envs = {path: systemd_parse.env_file(text) for path, text in files.items() if path.endswith(".env")}
    for values in envs.values():
        out += values.values()
    for path, text in files.items():
        if path.endswith(".env"):
            continue
        parsed = systemd_parse.settings(text)
        env = {k: v for _, key, value in parsed if key == "EnvironmentFile"
               for k, v in envs[systemd_parse.specifiers(value)].items()}
        for _, key, value in parsed:
            if key.startswith("Exec") or key == "RequiresMountsFor":
                out += systemd_parse.exec_words(value, command=key.startswith("Exec"), env=env)
            else:
                out.append(systemd_parse.specifiers(value))
    return out


BASE_SERVERS = shape(render("host", "127.0.0.1"))
BASE_DEMO = shape(render("demo_greeting", "hello"))
CASES = [(n, s) for n in (*SERVERS_VARS, *DEMO_VARS) for s in SPECIALS]


@pytest.mark.parametrize(("name", "special"), CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_a_special_value_is_refused_naming_the_variable_or_arrives_as_data(name, special):
    value = {**SERVERS_VARS, **DEMO_VARS}[name](SPECIALS[special])
    try:
        files = render(name, value)
    except GpunodeError as exc:
        assert name in str(exc), f"the refusal does not name {name}: {exc}"
        assert "Traceback" not in str(exc)
        assert not (name in TAKES_AS_DATA and special in ("percent", "dollar", "quotes", "semicolon")), \
            f"{name} refused a value it must take as data: {exc}"
        return
    assert special not in CONTROL or name == "extra_args", f"{name} took control characters: {value!r}"
    rebuilt = shape(files)
    base = BASE_DEMO if name in DEMO_VARS else BASE_SERVERS
    assert rebuilt == base, "the files hold other settings than with defaults"
    if name == "demo_unit":
        assert f"/etc/systemd/system/{value}" in files
        return
    wanted = value[-1] if isinstance(value, list) else str(value)
    if name == "model_source":
        wanted = wanted.rstrip("/")
    seen = data(files)
    assert any(wanted in d for d in seen), f"{wanted!r} does not arrive as data in {seen}"


def test_the_issues_injection_is_refused_with_where_it_came_from():
    v = {**roles.defaults(), "model_source": "/mnt/models/Q\n[Service]\nExecStartPre=/bin/touch /tmp/x\n[Unit]\n#"}
    with pytest.raises(GpunodeError) as err:
        variables.check(v, {"model_source": "--set"}, "lab/200")
    text = str(err.value)
    assert "variable model_source=" in text and "(from --set)" in text and "control characters \\n" in text
    assert "an absolute path without control characters" in text


def test_extra_args_with_a_newline_arrive_as_one_argument():
    files = render("extra_args", ["--chat-template", "line one\nExecStartPre=/bin/touch /tmp/x"])
    unit = files["/etc/systemd/system/gpunode-cpu0.service"]
    (exec_start,) = [v for _, k, v in systemd_parse.settings(unit) if k == "ExecStart"]
    words = systemd_parse.exec_words(exec_start)
    assert words[-2:] == ["--chat-template", "line one\nExecStartPre=/bin/touch /tmp/x"]
    assert [k for _, k, _ in systemd_parse.settings(unit)].count("ExecStartPre") == 0
