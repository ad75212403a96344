"""Every relative link of the docs and the README reaches a file of the repository, and a section
of it where the link names one (a heading's GitHub anchor or an explicit `<a id>`): moving a
section (docs/bench.md's measurements went to docs/bench-results/) must not leave a dead link."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    out = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    for heading in re.findall(r"^#+ (.*)$", text, re.M):
        title = re.sub(r"<[^>]+>", "", heading).strip().lower()
        out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def dead_links(page: Path, root: Path = ROOT) -> list[str]:
    out = []
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue
        name, _, section = target.partition("#")
        path = (page.parent / name).resolve() if name else page
        if not path.exists():
            out.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif section and path.suffix == ".md" and section not in anchors(path):
            out.append(f"{page.relative_to(root)}: {target} (no such section)")
    return out


def test_every_relative_link_of_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 20
    bad = [d for page in pages for d in dead_links(page)]
    assert not bad, "\n".join(bad)


def test_a_dead_link_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [there](missing.md) and [here](#nope) but [ok](#title).\n")
    assert dead_links(page, tmp_path) == ["page.md: missing.md (no such file)", "page.md: #nope (no such section)"]
