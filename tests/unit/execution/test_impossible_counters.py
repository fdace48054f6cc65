"""A server whose numbers are impossible (more accepted than drafted, +Inf counters, a NaN running gauge) is a data
fault of the point, never a crash: the run goes on, the point says what was wrong and takes SD from the per-request
stats, and the capture stays readable by `resume` and `report --recompute`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakeengine.drive import attach_plan, conversations, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.rundir.store import RunStore, load_summary
from specmeter.workflows.recompute import recompute

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(("fault", "said"), [("accepted_over_drafted", "impossible"),
                                             ("inf_counters", "not finite"), ("nan_gauge", None)])
def test_impossible_numbers_are_a_data_fault_and_the_capture_reads_back(tmp_path: Path, fault: str,
                                                                       said: str | None) -> None:
    root = tmp_path / "run"
    with FakeEngine(impossible_metrics=fault) as server:
        convs = conversations([f"Question {i}: explain caching." for i in range(4)])
        summary, error, _ = run_plan(attach_plan(server.url, convs, concurrency=[1, 2]), root)
    assert error is None, repr(error)
    assert summary.status == "complete"
    for point in only_config(summary).points:
        sd = point.sd
        assert sd.available and sd.per_request is not None  # the per-request stats stand in
        if said is not None:
            assert sd.counters_invalid_reason is not None and said in sd.counters_invalid_reason
        else:
            assert point.running_batch is None or point.running_batch.samples == 0  # no NaN batch sizes
    store = RunStore(root)
    for point in only_config(summary).points:
        assert store.read_capture(only_config(summary).config_id, point.point_id, point.repeat) is not None
    done = recompute(root)  # the same faults, derived again from what is on disk
    assert done and load_summary(root).status == "complete"
