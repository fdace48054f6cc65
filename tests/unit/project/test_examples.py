"""The example files the README points at stay valid for the code as it is."""

from __future__ import annotations

from contextlib import chdir
from pathlib import Path

from specmeter.data.workload import load_conversations
from specmeter.plans.sweep import read_sweep_file
from specmeter.schemas.plan import Role

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_demo_sweep_file_is_a_valid_sweep() -> None:
    sweep = read_sweep_file(EXAMPLES / "demo-sweep.yaml")
    configs = sweep.configs()
    assert configs[0].role is Role.baseline
    assert {c.k for c in configs if c.role is Role.candidate} >= {2, 4}
    assert sweep.repeats >= 3 and sweep.interleave
    root = EXAMPLES.parent
    for config in configs:  # the demo models it names exist in the repository
        assert (root / str(config.engine.model)).is_dir()
        if config.spec.draft_model:
            assert (root / config.spec.draft_model).is_dir()


def test_llamacpp_ceiling_sweep_file_adds_a_ceiling_per_k() -> None:
    sweep = read_sweep_file(EXAMPLES / "llamacpp-ceiling-sweep.yaml")
    configs = sweep.configs()
    assert sweep.engine.kind == "llamacpp" and sweep.ceiling
    ceilings = {c.k for c in configs if c.spec.synthetic_acceptance is not None
                and c.spec.synthetic_acceptance.is_ceiling(c.k)}
    verified = {c.k for c in configs if c.spec.enabled and not c.spec.synthetic}
    assert ceilings == verified == {2, 4}
    assert any(c.spec.synthetic and c.id not in {f"{v.id}-ceiling" for v in configs} for c in configs)


def test_llamacpp_p_min_sweep_file_runs_each_floor_beside_the_default() -> None:
    sweep = read_sweep_file(EXAMPLES / "llamacpp-p-min-sweep.yaml")
    configs = [c for c in sweep.configs() if c.role is Role.candidate]
    assert sweep.engine.kind == "llamacpp" and sweep.load.points and len(sweep.load.points) >= 3
    assert {c.k for c in configs if c.spec.draft_p_min is None} == {2, 4}  # llama.cpp's own default floor, 0
    floors = {c.spec.draft_p_min for c in configs if c.spec.draft_p_min is not None}
    assert len(floors) >= 3 and all(0 < p < 1 for p in floors if p is not None)


def test_trace_replay_sweep_file_replays_its_trace_at_each_scale() -> None:
    sweep = read_sweep_file(EXAMPLES / "trace-replay-sweep.yaml")
    assert [p.kind for p in sweep.load.points] == ["trace", "trace"] and sweep.interleave
    trace = sweep.workload.trace
    assert trace is not None
    root = EXAMPLES.parent
    with chdir(root):  # the file's paths are the repository root's, as its comment runs it
        convs, info = load_conversations(sweep.workload.dataset, sweep.workload.path, sweep.effective_load(),
                                         tokenizer=str(sweep.engine.model), trace=trace)
    assert convs and all(c.max_tokens and c.metadata["arrival_s"] < (trace.duration_s or 0) for c in convs)
    # The sample set is small: where a category's text runs out the run says it repeats, and nothing else.
    assert all("text is shorter than the trace asks of it" in note for note in info.notes)
    assert any(c.metadata.get("shared_tokens") for c in convs)  # its rows share prefixes, as it says


def test_phase_shift_sweep_file_sends_its_phases_in_order_with_a_table_beside_static_ks() -> None:
    sweep = read_sweep_file(EXAMPLES / "phase-shift-sweep.yaml")
    phases = sweep.workload.phases
    assert phases is not None and [p.name for p in phases] == ["code", "chat"]
    convs, info = load_conversations(sweep.workload.dataset, sweep.workload.path, sweep.effective_load(),
                                     phases=phases)
    switch = [c.phase for c in convs].index("chat")
    assert switch > 0 and {c.phase for c in convs[switch:]} == {"chat"} and info.phases == phases
    candidates = [c for c in sweep.configs() if c.role is Role.candidate]
    assert any(c.spec.num_speculative_tokens_per_batch_size for c in candidates)
    assert {c.k for c in candidates if not c.spec.num_speculative_tokens_per_batch_size} == {2, 4}
