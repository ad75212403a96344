"""The shipped data tables are read with libyaml where PyYAML has it, giving the values the
pure-Python loader gives; the derived sglang choices are parsed one pin set at a time (issue 45)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml

from gpunode import yamlsrc
from gpunode.resolve.derived import PinsetPicks
from gpunode.resolve.load import COMPAT, DERIVED, load
from gpunode.resolve.yamlread import KnowledgeBaseError

TABLES = ("compat/gpu_products.yml", "compat/kernel_sms.yml", "compat/derived/sglang-registry.yml",
          "facts/data/compute_caps.yml")


def test_tables_use_libyaml_where_pyyaml_has_it():
    assert yaml.__with_libyaml__  # the locked PyYAML's manylinux wheel has it
    assert yamlsrc.TableLoader is yaml.CSafeLoader


@pytest.mark.parametrize("name", TABLES)
def test_a_table_reads_as_the_pure_loader_reads_it(name: str):
    text = resources.files("gpunode").joinpath(name).read_text()
    assert yamlsrc.table(text) == yaml.safe_load(text)


def test_the_derived_choices_read_per_pin_set_equal_the_whole_file():
    whole = yaml.safe_load((COMPAT / DERIVED).read_text())["pinsets"]
    picks = PinsetPicks(COMPAT / DERIVED)
    assert sorted(picks) == sorted(whole) and len(whole) >= 5
    assert {pid: picks[pid] for pid in picks} == {pid: row.get("choices", {}) for pid, row in whole.items()}


def test_a_plan_parses_only_the_pin_sets_it_weighs():
    from gpunode.resolve import resolve
    from tests.unit.resolve_facts import field_notes

    kb = load.__wrapped__(COMPAT)  # a knowledge base of its own, no pin set parsed yet
    plan = resolve(field_notes(), kb=kb)
    assert isinstance(kb.sglang_picks, PinsetPicks)
    parsed = set(kb.sglang_picks._parsed)
    # the chosen one, and those pick.py weighed against it (their own refusals); not the rest of the file
    assert plan.pinset in parsed and parsed < set(kb.sglang_picks)


def test_an_error_in_one_pin_set_names_the_line_of_the_whole_file(tmp_path: Path):
    lines = (COMPAT / DERIVED).read_text().splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if line.startswith("  ") and not line.startswith("   ")][1]
    arch = next(i for i in range(second + 1, len(lines)) if lines[i].startswith("      ") and
                not lines[i].startswith("       "))
    lines.insert(arch + 1, lines[arch])  # the same architecture twice, in the second pin set
    path = tmp_path / "sglang-choices.yml"
    path.write_text("".join(lines))
    picks = PinsetPicks(path)
    pid = lines[second].strip().rstrip(":")
    with pytest.raises(KnowledgeBaseError, match=rf"{path}:{arch + 2}: key .* appears twice"):
        picks[pid]
