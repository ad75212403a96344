"""Every citation in the knowledge base (compat/*.yml: `source`, `sources`) points at something a
reader can open: a public URL, a file of this repository, or a section of docs/sources.md. A file
that lives outside the repository (a module inside the sglang or flashinfer wheel) is allowed only
beside a section of docs/sources.md that names it and says where to read it (issue 30)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpunode.resolve.load import COMPAT

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "docs" / "sources.md"
URL = re.compile(r"https?://[^\s;,)\"'>]+")
SECTION = re.compile(r"docs/sources\.md#([\w-]+)")
FILE = re.compile(r"(?<![\w/.#-])(?:[\w.-]+/)*[\w-]+\.(?:md|py|yml|yaml|json|txt|sh|cuh)\b")
# names of documents that were never in the repository, and sections of them ("facts §5.3")
UNREADABLE = re.compile(r"§|Architecture rows|Resolver (?:table|checks)|field-notes\.md|-facts\.md")


def sections(text: str) -> dict[str, str]:
    """anchor -> the text under it, up to the next anchor."""
    parts = re.split(r'<a id="([\w-]+)"></a>', text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def citations(folder: Path) -> Iterator[tuple[str, str]]:
    def walk(node: object, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{where}.{key}"
                if key == "source" and isinstance(value, str):
                    yield here, value
                elif key == "sources" and isinstance(value, list):
                    yield from ((f"{here}[{i}]", v) for i, v in enumerate(value))
                else:
                    yield from walk(value, here)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{where}[{i}]")
    for path in sorted(folder.rglob("*.yml")):
        yield from walk(yaml.safe_load(path.read_text()), str(path.relative_to(folder)))


def in_repository(name: str) -> bool:
    return any((base / name).is_file() for base in (ROOT, ROOT / "src" / "gpunode", COMPAT))


def problems(where: str, citation: str, anchors: dict[str, str]) -> list[str]:
    out = []
    if UNREADABLE.search(citation):
        out.append(f"{where}: cites a document that is not in the repository "
                   f"({UNREADABLE.search(citation).group(0)!r}); cite docs/sources.md#<section> instead")
    cited = SECTION.findall(citation)
    out += [f"{where}: docs/sources.md has no section #{a}" for a in cited if a not in anchors]
    text = SECTION.sub(" ", URL.sub(" ", citation))
    outside = [f for f in FILE.findall(text) if not in_repository(f)]
    told = " ".join(anchors.get(a, "") for a in cited)
    out += [f"{where}: {f} is neither a file of the repository nor named by the docs/sources.md section it cites"
            for f in outside if Path(f).name not in told]
    if not (URL.search(citation) or cited or any(in_repository(f) for f in FILE.findall(text))):
        out.append(f"{where}: cites no URL, repository file or docs/sources.md section: {citation!r}")
    return out


def test_every_citation_of_the_knowledge_base_resolves():
    anchors = sections(SOURCES.read_text())
    found = list(citations(COMPAT))
    assert len(found) > 150  # every rule file is read: doctor.yml's lists and gpu_products.yml's rows too
    bad = [p for where, citation in found for p in problems(where, citation, anchors)]
    assert not bad, "\n".join(bad)


def test_every_section_of_the_sources_page_is_cited_or_linked():
    """A section nothing points at is facts no rule relies on; it goes, or a rule cites it."""
    text = SOURCES.read_text()
    cited = {a for _, c in citations(COMPAT) for a in SECTION.findall(c)}
    cited |= {a for path in (ROOT / "src").rglob("*.py") for a in SECTION.findall(path.read_text())}
    linked = set(re.findall(r"\]\(#([\w-]+)\)", text))
    assert set(sections(text)) - cited - linked == set()


@pytest.mark.parametrize("citation, words", [
    ("facts §5.3", "not in the repository"),
    ("field-notes.md (CUDA symlinks)", "not in the repository"),
    ("docs/sources.md#no-such-section", "has no section #no-such-section"),
    ("sglang 0.5.23 srt/models/llama.py", "neither a file of the repository"),
    ("sglang 0.5.23 srt/models/llama.py; docs/sources.md#libnuma", "neither a file of the repository"),
    ("measured by hand", "cites no URL"),
])
def test_a_citation_a_reader_cannot_open_is_named(citation, words):
    found = problems("flags.yml.options.x.source", citation, sections(SOURCES.read_text()))
    assert any(words in p and p.startswith("flags.yml.options.x.source") for p in found), found


@pytest.mark.parametrize("citation", [
    "https://github.com/flashinfer-ai/flashinfer/issues/3493",
    "docs/sources.md#sglang-source (sglang 0.5.23 srt/arg_groups/model_overrides/gpt_oss.py)",
    "tests/data/device/h200-cuda/README.md; pinsets.yml toolkit_cccl",
])
def test_a_citation_a_reader_can_open_passes(citation):
    assert problems("x", citation, sections(SOURCES.read_text())) == []


def test_the_product_cites_no_document_outside_the_repository():
    """Code, roles and docs name docs/sources.md sections that exist, never the notes it was built from."""
    anchors = sections(SOURCES.read_text())
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.yml"), *(ROOT / "roles").rglob("*.py"),
             *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    bad = []
    for path in files:
        text = path.read_text()
        where = path.relative_to(ROOT)
        bad += [f"{where}: docs/sources.md has no section #{a}" for a in SECTION.findall(text) if a not in anchors]
        if path.suffix != ".md" and (m := UNREADABLE.search(text)):
            bad.append(f"{where}: cites {m.group(0)!r}, a document that is not in the repository")
    assert not bad, "\n".join(bad)
