"""Short flags are set by hand and mean one thing in every task (issue 30): ansible-playbook's
letters where it has one, `-h` is help everywhere, and numeric options say INT in --help.

Every task of the tree is checked, so a task added later with a clashing or automatic short flag
fails here. The letters below are the specification, written out (not read from the code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke.exceptions import ParseError
from invoke.parser import Parser
from tasks import ns  # the inv tree: the product's tasks and the lab's

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"  # recorded: see its README.md

# letter -> the long option it stands for, in every task that has that option
ANSIBLE = {"C": "check", "D": "diff", "l": "limit", "e": "set", "i": "inventory", "f": "forks", "v": "verbose",
           "t": "only", "T": "timeout", "K": "ask-become-pass"}  # -t is ansible-playbook's --tags (run only
# these), -T its --timeout, -K its --ask-become-pass
OWN = {"g": "group", "j": "json", "y": "yes"}
LETTERS = {**ANSIBLE, **OWN}
# options that take a whole number
NUMBERS = {"ct", "forks", "memory", "swap", "cores", "timeout", "input-len", "output-len", "requests", "seed",
           "job-samples", "job-output-tokens", "sample", "lines", "last", "grace", "servers"}
VALUE = {"set": "mem_fraction=0.5", "forks": "3", "timeout": "60", "limit": "kpro*:!kpro6/202",
         "inventory": "inv", "only": "weights", "group": "gpu"}


def tasks(coll=ns, prefix=""):
    out = {prefix + name: task for name, task in coll.tasks.items()}
    for name, sub in coll.collections.items():
        out.update(tasks(sub, f"{prefix}{name}."))
    return out


TASKS = tasks()


def parse(argv: list[str]) -> dict:
    required = [f"--{a.name}={VALUE.get(a.name, '300')}" for a in TASKS[argv[0]].get_arguments() if a.positional]
    (ctx,) = Parser(contexts=ns.to_contexts()).parse_argv([*argv, *required])  # onboard's host and ct
    return ctx.as_kwargs


def longs(name: str) -> set[str]:
    return {a.name.replace("_", "-").strip("-") for a in TASKS[name].get_arguments(ignore_unknown_help=True)}


def test_the_tree_has_the_tasks_this_table_covers():
    assert {"provision", "facts", "resolve", "status", "onboard", "bench", "teardown", "lab.up"} <= set(TASKS)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_short_flag_means_its_long_option_in_every_task(name):
    has = longs(name)
    for letter, long in LETTERS.items():
        if long not in has:
            with pytest.raises(ParseError):  # no other option has taken the letter
                parse([name, f"-{letter}", *([VALUE[long]] if long in VALUE else [])])
            continue
        value = [VALUE[long]] if long in VALUE else []
        short, full = parse([name, f"-{letter}", *value]), parse([name, f"--{long}", *value])
        assert short == full, (name, letter)
        key = {"set": "set_", "json": "json_" if "json_" in short else "json"}.get(long, long.replace("-", "_"))
        assert short[key] not in (None, False, [], 0), (name, letter, short)
    others = {n for a in TASKS[name].get_arguments(ignore_unknown_help=True) for n in a.names
              if len(n) == 1 and n not in LETTERS}
    assert others == set(), f"{name} has short flags outside the table: {others}"


def run_main(argv: list[str], capsys) -> tuple[int, str]:
    from gpunode.cli.main import main

    code: object = 0
    try:
        main(["gpunode", *argv], namespace=ns)  # inv's tree: the lab's tasks too
    except SystemExit as done:
        code = done.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 1 if code else 0), out.out + out.err


@pytest.mark.parametrize("name", sorted(TASKS))
def test_dash_h_is_help_in_every_task_and_numbers_say_int(name, capsys):
    code, out = run_main([name, "-h"], capsys)
    assert code == 0, out
    assert f"Usage: gpunode [--core-opts] {name} " in out
    for long in longs(name) & NUMBERS:
        assert f"--{long}=INT" in out, (name, long)
    for long in longs(name) - NUMBERS:
        assert f"--{long}=INT" not in out, (name, long)


def test_verbosity_counts_as_ansible_does():
    assert parse(["provision", "-v"])["verbose"] == 1
    assert parse(["provision", "-vvv"])["verbose"] == 3
    assert parse(["history", "-vv"])["verbose"] == 2
    assert parse(["provision"])["verbose"] == 0


def test_a_number_given_badly_is_still_named_with_its_range(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = run_main(["provision", "-f", "many", "--host", "x"], capsys)
    assert code == 2 and "--forks 'many' is not a whole number from 1 to 256" in out


def test_extra_vars_from_a_file_and_from_the_line(tmp_path, capsys):
    from gpunode.cli.main import main

    (tmp_path / "vars.yml").write_text("mem_fraction: 0.55\nmodel_path: /dev/shm/m\ntp: 1\n")

    def mem_fraction(*extra: str) -> str:
        main(["gpunode", "resolve", "--facts", str(H200), "-e", f"@{tmp_path}/vars.yml", *extra, "-j"])  # exit 0
        out = capsys.readouterr()
        argv = json.loads(out.out)["servers"][0]["argv"]
        return argv[argv.index("--mem-fraction-static") + 1]

    assert mem_fraction() == "0.55"
    assert mem_fraction("-e", "mem_fraction=0.6") == "0.6"  # the later -e wins, as in Ansible


@pytest.mark.parametrize("content,expected", [
    (None, "-e @{d}/vars.yml: no such file"),
    ("- mem_fraction\n", "vars.yml: a variables file must be a mapping"),
    ("mem fraction: 1\n", "vars.yml:1: 'mem fraction' is not a variable name"),
    ("mem_fraction: [0.5\n", "vars.yml:2: YAML syntax error"),
])
def test_a_bad_extra_vars_file_is_named(content, expected, tmp_path, capsys):
    if content is not None:
        (tmp_path / "vars.yml").write_text(content)
    code, out = run_main(["resolve", "--facts", str(H200), "-e", f"@{tmp_path}/vars.yml"], capsys)
    assert code == 2 and expected.replace("{d}", str(tmp_path)) in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("argv", [["--list"], ["provision", "--help"]])
def test_a_reader_that_goes_away_is_not_an_internal_error(argv):
    """`gpunode --list | true`: the pipe is closed before gpunode writes."""
    # without PYTHONUNBUFFERED (a user's shell): the output waits in stdout's buffer until the exit
    env = {k: v for k, v in os.environ.items() if k not in ("GPUNODE_DEBUG", "PYTHONUNBUFFERED")}
    proc = subprocess.Popen([sys.executable, "-c", "from gpunode.cli.main import main; main()", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "internal error" not in err and "Traceback" not in err and "Exception ignored" not in err, err
