"""A candidate judged by the engine installed on the node before it is started: judge/nodecheck.py,
as the servers role's judge runs it (steps/judge.py), but for one command line that no unit holds
yet, so no marker is read or kept and no lock manifest is asked for."""

from __future__ import annotations

import json
from typing import Any

from gpunode.steps.judge import SOURCE, WORKDIR, Verdicts
from gpunode.transport.base import Transport


def engine_verdict(target: Transport, engine: str, venv: str, args: list[str], env: dict[str, str],
                   deadline: float = 180.0) -> dict[str, Any]:
    """{"accepted": True|False|None, "error", "check", "where", "resolved", ...}: the engine's own verdict."""
    return engine_verdicts(target, engine, venv, [(list(args), dict(env))], deadline)[0]


def engine_verdicts(target: Transport, engine: str, venv: str, cases: list[tuple[list[str], dict[str, str]]],
                    deadline: float = 180.0) -> list[dict[str, Any]]:
    """One verdict per (arguments, environment), in one round trip (nodecheck runs them side by side)."""
    lines = "".join(json.dumps({"id": f"c{i}", "engine": engine, "argv": args, "env": env, "workdir": WORKDIR,
                                "digest": ""}) + "\n" for i, (args, env) in enumerate(cases))
    result = target.run([f"{venv.rstrip('/')}/bin/python", "-c", SOURCE.read_text(encoding="utf-8"), "--cases", "-",
                         "--deadline", f"{deadline:g}"], stdin=lines.encode(), timeout=deadline + 60)
    by_id = {verdict.get("id"): dict(verdict) for verdict in Verdicts.read(result.stdout).verdicts}
    none = {"accepted": None, "error": f"no verdict (exit code {result.exit_code}): "
            f"{(result.stderr or result.stdout)[-400:]}"}
    return [by_id.get(f"c{i}", none) for i in range(len(cases))]


def refusal(verdict: dict[str, Any]) -> str:
    """"" when accepted; else the engine's own words (or why it could not judge)."""
    if verdict.get("accepted") is True:
        return ""
    head = "the engine refuses" if verdict.get("accepted") is False else "the engine could not judge"
    check = f" ({verdict['check']})" if verdict.get("check") else ""
    where = f" at {verdict['where']}" if verdict.get("where") else ""
    return f"{head}{check}: {str(verdict.get('error') or '').strip()}{where}"
