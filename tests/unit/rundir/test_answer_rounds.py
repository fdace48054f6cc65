"""One run, one answer: the latest recommendation round is what every command shows first; each round is written
once, earlier rounds stay readable by number, and deciding again is explicit."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from in_process import specmeter

from specmeter.common.errors import InputError
from specmeter.rundir.answer import ANSWER_DIR, POINTER, next_round, read_answer, write_round
from specmeter.schemas.recommend import Recommendation

pytestmark = pytest.mark.timeout(300)
STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def sweep_table() -> Recommendation:
    return Recommendation.model_validate_json((STORED / POINTER).read_text(encoding="utf-8"))


def table(rec: Recommendation | dict[str, Any]) -> Any:
    if isinstance(rec, Recommendation):
        rec = json.loads(rec.model_dump_json())
    return rec["drafters"][0]["spec"]["num_speculative_tokens_per_batch_size"]


def corrected(rec: Recommendation) -> Recommendation:
    """`rec` as a verification would have corrected it: K = 4 at the measured batch 1."""
    out = rec.model_copy(deep=True)
    best = out.drafters[0]
    assert best.spec is not None and best.spec.num_speculative_tokens_per_batch_size
    best.spec.num_speculative_tokens_per_batch_size[0] = (1, 2, 4)
    best.spec.num_speculative_tokens = 4
    best.ranges[0].k = 4
    best.segments[0].k = 4
    out.corrects, out.changes = f"{ANSWER_DIR}/r1-verified.json", ["1-2: K 2 -> 4"]
    return out


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A copy of a real demo run as main wrote it before rounds: recommendation.json only."""
    return Path(shutil.copytree(STORED, tmp_path / "demo"))


@pytest.fixture
def verified_correction(tmp_path: Path) -> Path:
    """A run whose sweep table (round 1) verification contradicted; the correction (round 2) held."""
    run = Path(shutil.copytree(STORED, tmp_path / "corrected"))
    (run / POINTER).unlink()
    first = sweep_table()
    write_round(run, first, "decided", 1)
    write_round(run, first.model_copy(update={"verification": "disagreed", "verified_in": "verify"}), "verified", 1)
    second = corrected(first)
    write_round(run, second, "decided", 2)
    write_round(run, second.model_copy(update={"verification": "held", "verified_in": "verify"}), "verified", 2)
    return run


def test_recommend_shows_the_answer_of_an_earlier_layout_and_writes_nothing(legacy: Path) -> None:
    before = hashes(legacy)
    res = specmeter("recommend", legacy)
    assert res.returncode == 0, res.stderr
    assert "round 1 of 1: the answer" in res.stdout
    assert "layout before rounds" in res.stdout  # migrated on read, and said so
    doc = json.loads(specmeter("recommend", legacy, "--json").stdout)
    assert doc["answer_round"] == 1 and doc["history"] == [] and table(doc) == table(sweep_table())
    assert hashes(legacy) == before


def test_deciding_again_is_explicit_and_keeps_every_round(legacy: Path) -> None:
    before = hashes(legacy)
    res = specmeter("recommend", legacy, "--objective", "tpot")
    assert res.returncode == InputError.exit_code
    assert "--again" in res.stderr and "round 1" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert hashes(legacy) == before

    res = specmeter("recommend", legacy, "--objective", "tpot", "--again")
    assert res.returncode == 0, res.stderr
    after = hashes(legacy)
    replaced = {name for name in before if after.get(name) != before[name]}
    assert replaced <= {POINTER, "report.html"}  # the pointer and the page follow the answer; nothing else moved
    answer = read_answer(legacy)
    assert answer is not None and [r.number for r in answer.rounds] == [1, 2]
    assert answer.recommendation.objective == "tpot" and answer.at(1).recommendation.objective == "throughput"
    # Round 1 lived only in recommendation.json: it was kept under its number before the pointer moved.
    assert table(answer.at(1).recommendation) == table(sweep_table())
    assert Recommendation.model_validate_json((legacy / POINTER).read_text()).round == 2
    shown = json.loads(specmeter("recommend", legacy, "--round", "1", "--json").stdout)
    assert shown["objective"] == "throughput" and shown["answer_round"] == 2
    assert [h["round"] for h in shown["history"]] == [2]


def test_a_verified_correction_is_the_answer_of_every_command(verified_correction: Path, tmp_path: Path) -> None:
    run = verified_correction
    want = table(corrected(sweep_table()))
    assert want != table(sweep_table())

    doc = json.loads(specmeter("recommend", run, "--json").stdout)
    assert table(doc) == want and doc["round"] == 2 and doc["verification"] == "held"
    assert [(h["round"], h["verification"]) for h in doc["history"]] == [(1, "disagreed")]

    res = specmeter("plan", run, "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["answer_round"] == 2 and plan["answer_verification"] == "held"
    measured = [(s["start"], s["end"], s["k"]) for s in plan["tables"][0]["segments"] if s["basis"] == "measured"]
    answer = corrected(sweep_table()).drafters[0]
    assert measured == [(s.start, s.end, s.k) for s in answer.segments if s.basis == "measured"]

    shown = specmeter("report", run)
    assert shown.returncode == 0, shown.stderr
    assert "round 2 of 2: the answer; verification held" in shown.stdout
    assert specmeter("report", run, "--csv", tmp_path / "csv", "--html", tmp_path / "r.html").returncode == 0
    assert "round 2 of 2" in (tmp_path / "r.html").read_text(encoding="utf-8")
    with (tmp_path / "csv" / "recommendation.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["round"] == "2" and rows[0]["answer"] == "true" and rows[0]["verification"] == "held"
    assert {r["round"] for r in rows} == {"1", "2"}


def test_round_numbers_come_from_the_directory_never_from_a_files_content(verified_correction: Path) -> None:
    path = verified_correction / ANSWER_DIR / "r1-decided.json"
    raw = json.loads(path.read_text())
    raw["round"] = 7
    path.write_text(json.dumps(raw))
    answer = read_answer(verified_correction)
    assert answer is not None and [r.number for r in answer.rounds] == [1, 2]
    assert answer.at(1).recommendation.round == 1 and next_round(verified_correction) == 3


def test_a_rounds_file_is_written_once(verified_correction: Path) -> None:
    before = hashes(verified_correction)
    with pytest.raises(InputError, match="exists already"):
        write_round(verified_correction, sweep_table(), "decided", 2)
    assert hashes(verified_correction) == before


def test_the_earlier_layouts_corrected_rounds_read_by_their_numbers(legacy: Path) -> None:
    """Before rounds: the contradicted table as recommendation-r1.json, the correction in recommendation.json."""
    first = sweep_table().model_copy(update={"verification": "disagreed"})
    (legacy / "recommendation-r1.json").write_text(first.model_dump_json())
    second = corrected(sweep_table()).model_copy(update={"verification": "held", "round": 2,
                                                          "corrects": "recommendation-r1.json"})
    (legacy / POINTER).write_text(second.model_dump_json())
    answer = read_answer(legacy)
    assert answer is not None and answer.migrated
    assert [(r.number, r.verification) for r in answer.rounds] == [(1, "disagreed"), (2, "held")]
    write_round(legacy, sweep_table(), "decided", next_round(legacy))  # round 3: round 2 is kept first
    again = read_answer(legacy)
    assert again is not None and [r.number for r in again.rounds] == [1, 2, 3]
    assert table(again.at(2).recommendation) == table(second)
    assert (legacy / ANSWER_DIR / "r2-verified.json").exists()


def test_a_verification_refused_at_its_endpoint_changes_nothing(verified_correction: Path) -> None:
    before = hashes(verified_correction)
    entries = set(os.listdir(verified_correction))
    res = specmeter("verify", verified_correction, "--endpoint", "http://127.0.0.1:9")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert hashes(verified_correction) == before and set(os.listdir(verified_correction)) == entries
