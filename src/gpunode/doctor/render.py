"""docs/troubleshooting.md, rendered from compat/doctor.yml: one section per known failure.

    python -m gpunode.doctor.render            # rewrite docs/troubleshooting.md
    python -m gpunode.doctor.render --check    # exit 1 when the committed file is stale

tests/unit/test_doctor_render.py fails when the committed file differs from the rendering.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpunode.doctor.catalogue import Entry, load

DOC = Path(__file__).resolve().parents[3] / "docs" / "troubleshooting.md"

HEADER = """\
# Troubleshooting

<!-- Rendered from src/gpunode/compat/doctor.yml by `python -m gpunode.doctor.render`; do not edit by hand. -->

Known failures of inference servers on GPU nodes and containers: what you see, why, what to do,
and what gpunode does about it. `inv doctor --host H --ct N` reads a target (facts, gpunode units,
their journal, listening ports) and names the entries below that apply, with the line that shows
it (docs/doctor.md). Each entry lists where it was reported.

"""


def _detect(e: Entry) -> str:
    parts = []
    if e.journal:
        parts.append("a journal line matching " + ", ".join(f"`{p.pattern}`" for p in e.journal))
    if e.facts:
        parts.append("the facts check" + ("s " if len(e.facts) > 1 else " ") + ", ".join(f"`{f}`" for f in e.facts))
    return " or ".join(parts)


def render(entries: tuple[Entry, ...] | None = None) -> str:
    entries = entries if entries is not None else load()
    out = [HEADER, "| entry | what you see |\n| --- | --- |\n"]
    out += [f"| [{e.id}](#{e.id}) | {e.title} |\n" for e in entries]
    for e in entries:
        out.append(f'\n<a id="{e.id}"></a>\n## {e.title}\n\n')
        out.append("```text\n" + e.symptom + "\n```\n\n")
        out.append(f"- **Cause**: {e.cause}\n- **Fix**: {e.fix}\n- **gpunode**: {e.gpunode}\n")
        out.append(f"- **doctor** (`{e.id}`): {_detect(e)}\n")
        out.append("- **Sources**: " + ", ".join(f"<{s}>" for s in e.sources) + "\n")
    return "".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is stale against compat/doctor.yml; run `python -m gpunode.doctor.render`",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC} ({len(load())} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
