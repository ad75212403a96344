"""Registered secrets are masked in every form an output path writes them (JSON, env file,
systemd, shell quoting, repr), events and plans are masked as structures before json.dumps,
and extra_args refuses to carry a secret onto a command line."""

from __future__ import annotations

import io
import json

import pytest

from gpunode import secrets
from gpunode.engine.events import Event, TargetRecap
from gpunode.errors import InventoryError
from gpunode.report import HumanReport, JsonLines
from gpunode.resolve.choices import from_vars as choices_from
from gpunode.steps.unitfmt import env_line, exec_line
from tests.unit.test_resolve_cli import SMI, gpunode, qwen36_dir  # noqa: F401 - fixture

# A secret with every character an escaper touches.
NASTY = 'sk-"q\\u0\'te$HOME%n`x'


@pytest.fixture(autouse=True)
def registered():
    secrets.register_vars({"server_api_key": NASTY})


def test_every_written_form_of_a_secret_is_masked():
    for written in (json.dumps({"k": NASTY}), env_line("X", NASTY), exec_line(["/bin/x", NASTY]),
                    repr(NASTY), f"--token={NASTY}"):
        assert "sk-" not in secrets.redact(written), written


def test_json_events_and_plans_are_masked_as_structures():
    out = io.StringIO()
    sink = JsonLines(out, redact=secrets.redact)
    sink(Event("step", "kpro6/200", "servers", "file:/etc/gpunode/secrets.env", "changed",
               f"wrote {NASTY}", diff=f'+KEY="{NASTY}"\n'))
    sink.plan("kpro6/200", {"schema": "gpunode.plan/1", "env": {"HF_TOKEN": "hf_unregistered_value"},
                            "servers": [{"argv": ["/x/python", "--flag", NASTY]}]})
    sink.finish([TargetRecap("kpro6/200", error=f"failed: {NASTY!r}")])
    text = out.getvalue()
    assert "sk-" not in text and "hf_unregistered_value" not in text
    step, plan, recap = (json.loads(line) for line in text.splitlines())
    assert step["reason"] == "wrote ********" and step["diff"] == '+KEY="********"\n'
    assert plan["plan"]["env"]["HF_TOKEN"] == "********"  # a secret-looking key, even unregistered
    assert plan["plan"]["servers"][0]["argv"] == ["/x/python", "--flag", "********"]
    assert recap["targets"][0]["error"] == "failed: '********'"


def test_the_human_report_masks_reasons_and_diffs():
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    report = HumanReport(console, redact=secrets.redact)
    report(Event("step", "t", "servers", "file:/etc/x", "changed", f"wrote {NASTY}", diff=f'+K="{NASTY}"\n'))
    assert "sk-" not in console.file.getvalue() and "********" in console.file.getvalue()


@pytest.mark.parametrize("extra", [["--api-key", "sk-live-abcdef"], "--api-key=sk-live-abcdef --port 1",
                                   ["--admin-api-key", "sk-live-abcdef"]])
def test_an_api_key_in_extra_args_is_refused_without_echoing_it(extra):
    secrets.register_vars({"extra_args": extra})
    with pytest.raises(InventoryError) as refused:
        choices_from({"extra_args": extra})
    said = str(refused.value)
    assert "api-key" in said and "sk-live-abcdef" not in said and "server_api_key" in said
    assert secrets.redact("x sk-live-abcdef y") == "x ******** y"  # registered from extra_args itself


def test_a_registered_secret_in_extra_args_is_refused():
    with pytest.raises(InventoryError, match="argument 2 holds the value of a secret variable") as refused:
        choices_from({"extra_args": ["--header", f"Authorization: Bearer {NASTY}"]})
    assert "sk-" not in str(refused.value)


def test_inv_resolve_refuses_an_api_key_in_extra_args_and_never_prints_it(qwen36_dir):  # noqa: F811
    key = "sk-resolve-0123456789"
    out = gpunode("resolve", "--nvidia-smi", str(SMI / "rtx-pro-6000-x8" / "nvidia-smi.txt"),
                  "--model", str(qwen36_dir), "--set", f"server_api_key={key}x",
                  "--set", f"extra_args=--api-key {key}")
    assert out.returncode == 2, out.stderr
    assert "extra_args holds --api-key" in out.stderr and "Traceback" not in out.stderr
    assert key not in out.stdout + out.stderr
