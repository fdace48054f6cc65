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

DEMO_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123-180233-demo"


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
