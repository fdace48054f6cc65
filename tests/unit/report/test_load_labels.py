"""How plots label each kind of load point (report/load_labels.py): every registered kind has its labels, and each
label reads its own point."""

from __future__ import annotations

import pytest

from specmeter.config.models import ConcurrencyPoint, RatePoint
from specmeter.load.kinds import KINDS
from specmeter.report.load_labels import LABELS, labels


def test_every_kind_of_load_has_its_labels() -> None:
    assert set(LABELS) == set(KINDS)


@pytest.mark.parametrize(("point", "short", "title"), [
    (ConcurrencyPoint(concurrency=3), "c=3", "closed loop"),
    (RatePoint(rate=1.5, max_concurrency=2), "1.5 req/s", "open loop, Poisson arrivals, at most 2 in flight"),
    (RatePoint(rate=2.0, arrival="gamma", burstiness=0.5), "2 req/s", "open loop, gamma b=0.5 arrivals"),
])
def test_a_points_labels_read_the_point(point: ConcurrencyPoint | RatePoint, short: str, title: str) -> None:
    named = labels(point)
    assert named.short_label(point) == short and named.panel_title(point) == title
    assert named.xlabel and named.panel_key(point)
