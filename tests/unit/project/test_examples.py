"""The example files the README points at stay valid for the code as it is."""

from __future__ import annotations

from pathlib import Path

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
