"""Sequential sampling and the verification loop on the real engine.

A sweep of the baseline and draft_model K = 2 at concurrency 1 (attached to the session's servers) runs in
rounds until its decisions settle. Then a deliberately wrong table (K = 16 at every batch size: sixteen draft
passes and a 17-token verification per step cost far more than they accept on this pair) is verified:
the sweep's static K = 2 must beat it head to head at batch 1, the loop must write a corrected table from the
pooled evidence (the wrong one kept beside it), and the second round, verifying the correction, must hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_recommend_verify import _draft, _run
from vllm_helpers import ServerPool

from specmeter.analysis.recommend import recommend
from specmeter.config.models import SpecConfig
from specmeter.engines.deploy import with_deploy_configs
from specmeter.execution.runner import Execution, execute
from specmeter.rundir.answer import read_answer
from specmeter.rundir.store import RunStore, latest_records, load_summary
from specmeter.schemas.recommend import KRange, Recommendation
from specmeter.workflows.verify import VerifyLoop

pytestmark = pytest.mark.integration
WRONG = [(1, 64, 16)]


@pytest.fixture(scope="module")
def sweep_dir(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    k2 = _draft(models, 2)
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": 6},
        "engine": {"model": str(models / "demo-target"), "max_num_seqs": 64},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": [{**k2.model_dump(mode="json", exclude_none=True, exclude={"extra"}),
                        "endpoint": pool.get(k2).base_url}],
        # 96 tokens as in the demo: over the first ~32 the tiny pair accepts too little for K = 2 to pay.
        # Five rounds at most: the verification inherits the budget. The wrong table's K = 16 runs about 1.5x
        # slower than K = 2 here, so the head-to-head settles in four (K = 8, about 15% apart, could stay unsure
        # after five on a loaded 2-core machine, at about the same time per round).
        "load": {"concurrency": [1], "max_tokens": 96, "temperature": 0, "warmup": 1, "max_rounds": 5},
        "interleave": True,
    }
    out = tmp_path_factory.mktemp("loop")
    (out / "sweep.yaml").write_text(yaml.safe_dump(sweep), encoding="utf-8")
    _run(["sweep", str(out / "sweep.yaml"), "--out", str(out), "--name", "sweep"])
    return out / "sweep"


def test_the_sweep_samples_adaptively_and_records_why_each_point_stopped(sweep_dir: Path) -> None:
    summary = load_summary(sweep_dir)
    assert summary.plan.load.precision == "adaptive"
    (entry,) = summary.sampling
    assert 2 <= entry.rounds <= 5 and entry.stopped in ("settled", "futile", "budget")
    records = [r for r in RunStore(sweep_dir).read_records() if not r.warmup]
    assert {r.repeat for r in records} == set(range(entry.rounds))
    assert entry.requests == max(sum(1 for r in records if r.config_id == c.config_id) for c in summary.configs)
    (choice,) = summary.analysis.choices
    assert choice.settled == (entry.stopped == "settled")
    if entry.stopped in ("futile", "budget"):  # stopped open: a win unlikely by the budget, or out of it
        assert entry.looks[-1].open


def test_verify_corrects_a_wrong_table_and_the_correction_holds(pool: ServerPool, models: Path,
                                                                sweep_dir: Path) -> None:
    sweep = load_summary(sweep_dir)
    neutral = recommend(sweep, latest_records(RunStore(sweep_dir).read_records()), source_run=str(sweep_dir))
    rec = with_deploy_configs(neutral, "vllm")
    best = rec.best
    assert best is not None
    wrong_spec = _draft(models, 16).model_copy(update={"num_speculative_tokens_per_batch_size": WRONG})
    ranges = [KRange(start=a, end=b, k=k, bases=["measured"]) for a, b, k in WRONG]  # the table, edited alike
    wrong = rec.model_copy(update={"drafters": [best.model_copy(update={"spec": wrong_spec, "ranges": ranges})]})

    tables: list[SpecConfig] = []

    def serve(table: SpecConfig) -> str:
        """Each table the loop verifies runs on a session server of its own (the sweep attached to them)."""
        tables.append(table)
        return pool.get(table).base_url

    def run(ex: Execution, target: Path) -> None:
        try:
            execute(ex, RunStore(target))
        finally:
            pool.stop(ex.plan.configs[-1].spec)

    said: list[str] = []
    final = VerifyLoop(run_dir=sweep_dir, execute=run, say=said.append, first_dir=sweep_dir / "verify",
                       serve=serve).run(wrong, rounds=2, number=1, on_disk=False)
    assert tables[0] == wrong_spec and len(tables) == 2, said

    first = load_summary(sweep_dir / "verify")
    (vp,) = first.analysis.verification
    assert vp.drafted.followed and vp.drafted.expected_k == 16
    assert vp.disagrees and vp.challenge is not None and vp.challenge.outcome == "beats", vp.note
    assert any("the table is wrong" in line for line in said), said
    for entry in first.sampling:  # what a look rested sat out the round after it
        for look in entry.looks:
            assert all((res := first.config(cid)) is not None and res.point(entry.point_id, look.rounds) is None
                       for cid in look.rested)
    answer = read_answer(sweep_dir)
    assert answer is not None and [(r.number, r.stage) for r in answer.states] == \
        [(1, "decided"), (1, "verified"), (2, "decided"), (2, "verified")]
    kept = answer.at(1).recommendation
    assert kept.verification == "disagreed" and kept.best is not None and kept.best.spec == wrong_spec
    assert final.round == 2 and final.corrects == "answer/r1-verified.json"
    assert final.best is not None and final.best.ranges[0].k == 2 and any("K 16 -> 2" in c for c in final.changes)
    assert final.verification == "held" and final.verified_in == "verify-r2", said
    on_disk = Recommendation.model_validate_json((sweep_dir / "recommendation.json").read_text(encoding="utf-8"))
    assert on_disk == final == answer.recommendation
