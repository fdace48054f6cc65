"""An attached candidate whose plan names no speculative config: the planner fits it on what its counters say it
drafted; recommend, which needs its drafter and K for a table, refuses it in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.analysis.recommend import recommend
from specmeter.common.errors import InputError
from specmeter.config.models import SpecConfig
from specmeter.predict.observations import observations
from specmeter.rundir.store import load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.results import RunSummary

DEMO_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def test_an_attached_candidate_without_its_spec_keeps_the_k_its_counters_drafted() -> None:
    summary = load_summary(DEMO_RUN)
    cand = next(c for c in summary.plan.configs if c.role is Role.candidate)
    measured = [o.k for o in observations(summary, "run", set(), []) if o.config_id == cand.id]
    cand.spec = SpecConfig()  # as an attach run's plan holds it when --spec was not given
    attached = [o for o in observations(summary, "run", set(), []) if o.config_id == cand.id]
    assert measured and [o.k for o in attached] == measured
    assert all(o.k > 0 and o.tokens_per_step > 1 for o in attached)
    assert all(o.drafter is not None and cand.id in o.drafter for o in attached)


def test_recommend_refuses_an_attached_candidate_without_its_spec_naming_the_k_it_drafted() -> None:
    """The README's attach flow without --spec: one line with the --spec to give, never a validation traceback."""
    summary = load_summary(DEMO_RUN)
    cand = next(c for c in summary.plan.configs if c.role is Role.candidate)
    k = cand.k  # a draft model drafts K tokens every step: its counters show exactly K
    cand.spec = SpecConfig()
    with pytest.raises(InputError) as err:
        recommend(summary, [], source_run="runs/x")
    line = str(err.value)
    assert "\n" not in line and cand.id in line and "--spec" in line
    assert f'"num_speculative_tokens": {k}' in line


def _attached(summary: RunSummary, spec: SpecConfig) -> str:
    """The demo's candidate as an attached server given `spec` (--spec): what it measured is what it drafted."""
    cand = next(c for c in summary.plan.configs if c.role is Role.candidate)
    cand.engine = cand.engine.model_copy(update={"endpoint": "http://127.0.0.1:8001"})
    cand.spec = spec
    return cand.id


def test_recommend_refuses_an_attached_server_that_drafts_another_k_than_its_spec_says() -> None:
    summary = load_summary(DEMO_RUN)
    k = next(c for c in summary.plan.configs if c.role is Role.candidate).k
    cid = _attached(summary, SpecConfig(method="draft_model", num_speculative_tokens=k + 2, draft_model="d"))
    with pytest.raises(InputError) as err:
        recommend(summary, [], source_run="runs/x")
    line = str(err.value)
    assert "\n" not in line and cid in line and f"K = {k + 2}" in line and f'"num_speculative_tokens": {k}' in line


def test_an_ngram_server_may_draft_fewer_than_its_k_but_never_more() -> None:
    summary = load_summary(DEMO_RUN)
    k = next(c for c in summary.plan.configs if c.role is Role.candidate).k
    _attached(summary, SpecConfig(method="ngram", num_speculative_tokens=k + 2))
    recommend(summary, [], source_run="runs/x")  # fewer drafted than K: n-gram misses, nothing claimed wrong
    fresh = load_summary(DEMO_RUN)
    _attached(fresh, SpecConfig(method="ngram", num_speculative_tokens=max(1, k - 1)))
    with pytest.raises(InputError, match="does not run"):
        recommend(fresh, [], source_run="runs/x")


def test_a_drafter_that_drafts_k_every_step_is_read_as_k_per_step() -> None:
    """A request's last step may accept drafts past max_tokens that are never emitted: steps are not fewer than the
    engine counted, so a draft model (K drafted at every step) reads exactly K, not a few percent more."""
    summary = load_summary(DEMO_RUN)
    drafted = [(o, summary.plan.config(o.config_id)) for o in observations(summary, "run", set(), []) if o.drafter]
    assert drafted
    for obs, cfg in drafted:
        assert cfg is not None and obs.k == pytest.approx(cfg.k), (obs.config_id, obs.point_id)
        assert 1.0 < obs.tokens_per_step <= cfg.k + 1
