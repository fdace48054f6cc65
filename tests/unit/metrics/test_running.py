"""The engine's running batch over a point (metrics/running.py): the time at each batch size."""

from __future__ import annotations

import pytest

from specmeter.metrics.running import summarize_running


def test_each_batch_sizes_share_of_time_is_its_samples_times_the_interval_over_the_sampled_time() -> None:
    interval = 0.25
    sizes = [0, 1, 1, 1, 2, 2, 3, 5, 5, 5, 5, 0]
    rb = summarize_running("vllm:num_requests_running", [(i * interval, float(v)) for i, v in enumerate(sizes)],
                           interval, None)
    total = len(sizes) * interval
    assert rb.time_share == pytest.approx({size: sizes.count(size) * interval / total for size in set(sizes)})
    assert sum(rb.time_share.values()) == pytest.approx(1.0)
    assert "time_share" in rb.model_dump()  # it reaches summary.json


def test_no_samples_no_time() -> None:
    assert summarize_running("g", [], 0.25, None).time_share == {}
