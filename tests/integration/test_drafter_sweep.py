"""Which drafter, decided head to head on the real engine: a sweep of the baseline, the demo draft model, the demo
EAGLE-3 head and n-gram lookup (the session's servers, attached), then `specmeter recommend` names one drafter
with its table and static fallback and says by how much it beat the runner-up, on requests both ran; the report
puts the drafters side by side with the drafting cost the sweep's step-cost model fitted."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from vllm_helpers import ServerPool, attached_sweep_file

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.rundir.store import CALIBRATION, RunStore
from specmeter.schemas.recommend import Recommendation

pytestmark = pytest.mark.integration
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
LABELS = {"draft_model demo-draft", "eagle3 demo-eagle3", "ngram n-gram 2..4"}


def _drafters(models: Path) -> list[SpecConfig]:
    """The session's servers of the other tests (the same configs, so no server starts for this module alone)."""
    return [SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=2, draft_model=str(models / "demo-draft")),
            SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=3, draft_model=str(models / "demo-eagle3")),
            SpecConfig(method=SpecMethod.ngram, num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=4)]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([*SPECMETER, *args], capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


@pytest.fixture(scope="module")
def sweep_dir(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("drafters")
    # One round a point: the drafter choice's form and pairing are checked, not which drafter wins.
    attached_sweep_file(pool, models, _drafters(models), out, num_prompts=5, load={
        "concurrency": [1, 4], "max_tokens": 32, "temperature": 0, "warmup": 1, "precision": "fixed"})
    _run(["sweep", str(out / "sweep.yaml"), "--out", str(out), "--name", "sweep"])
    return out / "sweep"


@pytest.fixture(scope="module")
def answer(sweep_dir: Path) -> tuple[Recommendation, str]:
    res = _run(["recommend", str(sweep_dir), "--max-num-seqs", "64"])
    rec = Recommendation.model_validate_json((sweep_dir / "recommendation.json").read_text(encoding="utf-8"))
    return rec, res.stdout


def test_one_drafter_is_named_with_its_table_and_static_fallback(answer: tuple[Recommendation, str]) -> None:
    rec, stdout = answer
    assert {d.drafter for d in rec.drafters} == LABELS
    choice = rec.drafter_choice
    assert choice is not None and rec.best is not None
    # The answer names the chosen drafter first; the runner-up is another, the best of the rest by score.
    assert choice.chosen == rec.best.drafter == rec.drafters[0].drafter and choice.runner_up in LABELS - {choice.chosen}
    # The walk met every costlier drafter against the choice so far: one duel per step after the cheapest.
    assert len(choice.evidence) == len(LABELS) - 1
    assert f"drafter: {choice.reason}" in " ".join(stdout.split())
    assert f"best: {choice.chosen}" in stdout and "static K=" in stdout


def test_the_margin_is_paired_on_requests_both_tables_ran(sweep_dir: Path,
                                                          answer: tuple[Recommendation, str]) -> None:
    rec, _ = answer
    choice = rec.drafter_choice
    assert choice is not None and choice.margin is not None
    # Every configuration ran the same requests at every point: the sweep's pairing.
    keys: dict[tuple[str, str], set[tuple[int, str, int]]] = defaultdict(set)
    for r in RunStore(sweep_dir).read_records():
        if r.ok and not r.warmup:
            keys[(r.point_id, r.config_id)].add((r.repeat, r.conversation_id, r.turn))
    for point in {p for p, _ in keys}:
        assert len({frozenset(v) for (p, _), v in keys.items() if p == point}) == 1
    picks = {d.drafter: {pid: s.chosen for s in d.segments if s.basis == "measured" for pid in s.point_ids}
             for d in rec.drafters}
    mine, theirs = picks[choice.chosen], picks[choice.runner_up]
    differ = [p for p in mine if p in theirs and mine[p] != theirs[p]]
    margin = choice.margin
    if not differ:  # both tables run the same server everywhere (drafting off): nothing to pair, and it says so
        assert margin.paired_requests == 0 and "same configuration" in choice.reason
        return
    assert 0 < margin.paired_requests <= sum(len(keys[(p, str(mine[p]))]) for p in differ)
    assert margin.config_id == choice.chosen and margin.against == choice.runner_up
    assert margin.ratio.value is not None and margin.outcome is not None


def test_the_report_puts_the_drafters_side_by_side(sweep_dir: Path, answer: tuple[Recommendation, str]) -> None:
    assert (sweep_dir / CALIBRATION).exists()  # the sweep fitted its step-cost model
    out = " ".join(_run(["report", str(sweep_dir), "-v"]).stdout.split())
    assert "Drafters side by side" in out and "drafting ms per step fitted by the step-cost model" in out
    for cfg in ("draft_model-k2", "eagle3-k3", "ngram-k4"):
        assert out.count(f"Acceptance per category ({cfg}") == 1
