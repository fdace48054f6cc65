"""Per-category acceptance (metrics/categories.py): the bootstrap interval of each category's AL."""

from __future__ import annotations

import random

from specmeter.metrics.categories import al_interval, category_breakdown
from specmeter.schemas.metrics import CategorySD
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts


def counts(steps: int, accepted: int, k: int = 4) -> SDCounts:
    return SDCounts(source="per_request", num_steps=steps, num_draft_tokens=steps * k, num_accepted_tokens=accepted)


def requests(n: int, seed: int = 1) -> list[SDCounts]:
    """n requests whose AL varies from prompt to prompt (1.5 to 3.5)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        steps = rng.randint(10, 40)
        out.append(counts(steps, int(steps * rng.uniform(0.5, 2.5))))
    return out


def record(i: int, category: str, sd: SDCounts | None, warmup: bool = False) -> RequestRecord:
    return RequestRecord(config_id="sd", point_id="c1", conversation_id=f"{category}-{i}", category=category,
                         warmup=warmup, ok=True, sd=sd)


def test_interval_contains_the_point_estimate_and_narrows_with_more_requests() -> None:
    few, many = requests(8), requests(200)
    widths = []
    for items in (few, many):
        ci = al_interval(items)
        assert ci is not None
        al = 1 + sum(c.num_accepted_tokens for c in items) / sum(c.num_steps for c in items)
        assert ci[0] <= al <= ci[1]
        assert ci[0] < ci[1]
        widths.append(ci[1] - ci[0])
    assert widths[1] < widths[0] / 2


def test_interval_is_deterministic() -> None:
    items = requests(30)
    assert al_interval(items) == al_interval(items)


def test_no_interval_for_one_request_or_requests_without_steps() -> None:
    assert al_interval([counts(20, 30)]) is None
    assert al_interval([counts(20, 30), counts(0, 0), counts(0, 0)]) is None
    assert al_interval([]) is None


def test_identical_requests_give_a_zero_width_interval() -> None:
    ci = al_interval([counts(10, 20)] * 5)
    assert ci is not None and ci[0] == ci[1] == 3.0


def test_breakdown_rows_carry_the_interval() -> None:
    recs = [record(i, "coding", c) for i, c in enumerate(requests(20))]
    recs += [record(0, "math", counts(10, 15)), record(1, "math", counts(12, 6), warmup=True)]
    cb = category_breakdown(recs)
    assert cb is not None
    coding, math = cb.categories
    assert coding.category == "coding" and coding.al_step_weighted is not None
    assert coding.al_ci95_low is not None and coding.al_ci95_high is not None
    assert coding.al_ci95_low <= coding.al_step_weighted <= coding.al_ci95_high
    # one measured request (the warmup one does not count): no interval
    assert math.requests == 1 and math.al_ci95_low is None and math.al_ci95_high is None
    assert cb.pooled.al_ci95_low is not None and cb.pooled.al_step_weighted is not None
    assert cb.pooled.al_ci95_low <= cb.pooled.al_step_weighted


def test_rows_stored_before_the_interval_existed_still_load() -> None:
    old = {"category": "qa", "requests": 3, "counts": counts(10, 15).model_dump(), "al_step_weighted": 2.5,
           "al_request_mean": 2.4, "acceptance_rate": 0.375, "per_position_rate": [], "conditional_rate": []}
    row = CategorySD.model_validate(old)
    assert row.al_ci95_low is None and row.al_ci95_high is None
