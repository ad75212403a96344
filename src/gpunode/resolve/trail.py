"""Decisions and warnings collected while resolving, in the order they were made."""

from __future__ import annotations

from gpunode.resolve.plan import Decision


class Trail:
    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.warnings: list[str] = []

    def decide(self, decision: str, value: object, reason: str, *, fact: str = "", rule: str = "",
               source: str = "") -> None:
        self.decisions.append(Decision(decision, str(value), reason, fact, short(rule), source))

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


def short(where: str) -> str:
    """Paths under the package's compat/ folder are cited from there ("compat/gpus.yml:97")."""
    marker = "/gpunode/compat/"
    return "compat/" + where.split(marker, 1)[1] if marker in where else where
