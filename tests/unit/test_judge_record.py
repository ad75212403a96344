"""The judge's recorded verdicts (gpunode/judge/record.py): what a record answers, and when it refuses.

Built from a real model config (tests/data/models) and a small pylock; no judge environment here
(tests/test_sglang_judge.py runs the judge, and writes the shipped records with `inv kb.verdicts`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.judge import Case, Gpu, Verdict, record

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
H100 = Gpu("9.0", "NVIDIA H100 80GB HBM3", 81559, 1, "13.0")


def lock(tmp: Path, sglang: str = "0.5.17") -> Path:
    p = tmp / f"pylock-{sglang}.toml"
    p.write_text(f'lock-version = "1.0"\n[[packages]]\nname = "sglang"\nversion = "{sglang}"\n'
                 '[[packages]]\nname = "transformers"\nversion = "5.6.0"\n'
                 '[[packages]]\nname = "sglang-kernel"\nversion = "0.4.5"\n')
    return p


def cases(model: Path) -> list[Case]:
    return [Case("default", ("--model-path", "x"), str(model), H100),
            Case("no_buffer", ("--model-path", "x", "--mamba-radix-cache-strategy", "no_buffer"), str(model), H100)]


def verdicts(model: Path) -> list[Verdict]:
    return [Verdict("default", True, resolved={"attention_backend": "fa3", "tp_size": 1}),
            Verdict("no_buffer", False, f"AssertionError: no_buffer in {model} do not support overlap schedule",
                    "srt/server_args.py:1 (_handle_mamba)")]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "checkout-a" / "qwen3.6-27b-nvfp4"
    shutil.copytree(MODELS / "qwen3.6-27b-nvfp4", folder)
    return folder


def recorded(tmp_path: Path, model: Path) -> Path:
    got = record.lookup("cu13-b", lock(tmp_path), cases(model), tmp_path / "rec")
    assert not got.current and len(got.missing) == 2, "an absent record answers nothing"
    return record.write(record.update(got, cases(model), verdicts(model), lock(tmp_path)), tmp_path / "rec")


def test_a_written_record_answers_every_case_with_the_judges_verdict_in_another_checkout(tmp_path, model):
    recorded(tmp_path, model)
    elsewhere = tmp_path / "checkout-b" / model.name           # same config, another place
    shutil.copytree(model, elsewhere)
    got = record.lookup("cu13-b", lock(tmp_path), cases(elsewhere), tmp_path / "rec")
    assert got.current and not got.missing
    assert got.found["default"].accepted is True and got.found["default"].resolved == {"attention_backend": "fa3"}
    bad = got.found["no_buffer"]
    assert bad.accepted is False and bad.where == "srt/server_args.py:1 (_handle_mamba)"
    assert f"no_buffer in {elsewhere} do not" in bad.error, "the model's place is this checkout's"


def test_a_changed_model_config_or_gpu_is_a_plan_the_record_does_not_hold(tmp_path, model):
    recorded(tmp_path, model)
    config = model / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers"', '"num_hidden_layers" ', 1))
    assert len(record.lookup("cu13-b", lock(tmp_path), cases(model), tmp_path / "rec").missing) == 2
    other = [Case(c.id, c.args, c.model_dir, Gpu("10.0", "NVIDIA B200", 183359, 1, "13.0")) for c in cases(model)]
    assert len(record.lookup("cu13-b", lock(tmp_path), other, tmp_path / "rec").missing) == 2


def test_a_record_edited_by_hand_is_refused(tmp_path, model):
    path = recorded(tmp_path, model)
    data = json.loads(path.read_text())
    for v in data["verdicts"].values():
        if v["accepted"] is False:
            v.update(accepted=True, resolved={})
            v.pop("error"), v.pop("where")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"cu13-b\.json does not match its seal.*inv kb.verdicts --pinset cu13-b"):
        record.lookup("cu13-b", lock(tmp_path), cases(model), tmp_path / "rec")
    data.pop("seal")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not written by the judge"):
        record.lookup("cu13-b", lock(tmp_path), cases(model), tmp_path / "rec")


def test_a_changed_lock_rejudges_every_plan_and_a_verdict_the_judge_no_longer_gives_is_stale(tmp_path, model):
    recorded(tmp_path, model)
    newer = lock(tmp_path, "0.5.18")
    got = record.lookup("cu13-b", newer, cases(model), tmp_path / "rec")
    assert not got.current and len(got.missing) == 2 and not got.found
    same, changed = verdicts(model)[0], Verdict("no_buffer", True, resolved={"disable_overlap_schedule": True})
    assert record.stale(got, cases(model), [same, verdicts(model)[1]]) == []
    lines = record.stale(got, cases(model), [same, changed])
    assert len(lines) == 1 and lines[0].startswith("no_buffer: recorded {'accepted': False")


def test_the_shipped_records_are_sealed_by_the_judge():
    """Each record under compat/derived/verdicts/ (`inv kb.verdicts` writes them; a pin set with none
    is judged in full by tests/test_sglang_judge.py) matches its seal."""
    for path in sorted(record.FOLDER.glob("*.json")):
        rec = record.load(path.stem)
        assert rec.pinset == path.stem and rec.verdicts
        assert rec.seal == rec.sealed(), f"{path.name} was not written by the judge"


def test_kb_verdicts_refuses_an_unknown_pinset_and_names_the_known_ones():
    code = "import sys; from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"
    proc = subprocess.run([sys.executable, "-c", code, "kb.verdicts", "--pinset", "cu99-nope"], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode != 0
    assert "unknown SGLang pin set 'cu99-nope'" in proc.stderr and "cu13-b" in proc.stderr, proc.stderr


def test_the_judge_digest_ignores_docstrings_and_comments_but_not_code():
    code = 'def f(x):\n    """What f does."""\n    return x + 1  # why\n'
    assert record.code_digest(code) == record.code_digest(code.replace("What f does.", "Said otherwise.")
                                                          .replace("# why", "# because"))
    assert record.code_digest(code) != record.code_digest(code.replace("x + 1", "x + 2"))
    assert record.code_digest(code) != record.code_digest(code.replace('"""What f does."""', 'print("hi")'))


def test_judging_only_what_the_record_lacks_adds_it_and_keeps_the_rest(tmp_path, model, monkeypatch):
    """What `inv kb.refresh` derives with (record.judge_kept): a case the current record holds is answered
    from it, only the others go to the judge, and their verdicts join the record, sealed."""
    import gpunode.judge

    recorded(tmp_path, model)
    b200 = Case("b200", ("--model-path", "x"), str(model), Gpu("10.0", "NVIDIA B200", 183359, 1, "13.0"))
    asked: list[list[str]] = []

    def judge(env, todo):
        asked.append([c.id for c in todo])
        return [Verdict(c.id, True, resolved={"attention_backend": "trtllm_mha"}) for c in todo]

    monkeypatch.setattr(gpunode.judge, "judge", judge)
    got = record.judge_kept(None, "cu13-b", lock(tmp_path), [*cases(model), b200], tmp_path / "rec", log=print)
    assert asked == [["b200"]], "only the case the record lacks is judged"
    assert [v.accepted for v in got] == [True, False, True] and got[2].resolved == {"attention_backend": "trtllm_mha"}
    again = record.lookup("cu13-b", lock(tmp_path), [*cases(model), b200], tmp_path / "rec")
    assert again.current and not again.missing, "the judged case is recorded beside the others"
    assert record.judge_kept(None, "cu13-b", lock(tmp_path), [b200], tmp_path / "rec", log=print)[0].accepted
    assert asked == [["b200"]], "a recorded case is not judged again"
