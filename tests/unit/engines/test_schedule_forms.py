"""A K table in TensorRT-LLM's own form: speculative_config.draft_len_schedule, each range's largest batch size to
its K, checked against the rules TensorRT-LLM's llm_args.py (DecodingBaseConfig.validate_draft_len_schedule_and_sort)
enforces: keys >= 1, draft lengths in [0, max_draft_len], the smallest key drafting max_draft_len; batches above the
largest key draft 0 (max_concurrency is translated to {max_concurrency: max_draft_len})."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.trtllm import TRTLLMLauncher

DRAFT = Path(__file__).resolve().parents[3] / "models" / "demo-draft"
THREE_RANGES = [(1, 4, 4), (5, 16, 2), (17, 64, 1)]


def table(k: int, ranges: list[tuple[int, int, int]]) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "draft_model": str(DRAFT), "num_speculative_tokens": k,
                                      "num_speculative_tokens_per_batch_size": ranges})


def static_k(k: int) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "draft_model": str(DRAFT), "num_speculative_tokens": k})


def trtllm_accepts(speculative: dict[str, Any]) -> None:
    """The checks TensorRT-LLM's own validator makes on draft_len_schedule."""
    schedule, k = speculative["draft_len_schedule"], speculative["max_draft_len"]
    assert all(isinstance(b, int) and b >= 1 for b in schedule) and all(0 <= v <= k for v in schedule.values())
    assert schedule[min(schedule)] == k


def drafted_at(schedule: dict[int, int], batch: int) -> int:
    """The K TensorRT-LLM drafts at `batch` running requests: the smallest key at or above it, else 0."""
    return next((schedule[key] for key in sorted(schedule) if batch <= key), 0)


def test_a_three_range_table_is_its_draft_len_schedule() -> None:
    options = TRTLLMLauncher.llm_api_options(EngineSpec(model="m", kind="trtllm"), table(4, THREE_RANGES))
    speculative = yaml.safe_load(yaml.safe_dump(options))["speculative_config"]  # as the YAML file holds it
    assert speculative["draft_len_schedule"] == {4: 4, 16: 2, 64: 1} and speculative["max_draft_len"] == 4
    trtllm_accepts(speculative)
    for start, end, k in THREE_RANGES:  # the engine drafts the table's K across each whole range
        assert {drafted_at(speculative["draft_len_schedule"], b) for b in range(start, end + 1)} == {k}


def test_a_trailing_k_of_0_is_the_schedules_own_zero_above_its_largest_key() -> None:
    speculative = TRTLLMLauncher.speculative_options(table(4, [(1, 8, 4), (9, 32, 2), (33, 256, 0)]))
    schedule = speculative["speculative_config"]["draft_len_schedule"]
    assert schedule == {8: 4, 32: 2} and drafted_at(schedule, 100) == 0
    trtllm_accepts(speculative["speculative_config"])


def test_the_deploy_config_is_the_schedule_with_the_note_on_how_trtllm_reads_it() -> None:
    deploy = TRTLLMLauncher().deploy_config(table(4, THREE_RANGES), None, 64)
    assert deploy is not None and deploy.dynamic
    assert deploy.config["speculative_config"]["draft_len_schedule"] == {4: 4, 16: 2, 64: 1}
    assert any("largest batch size" in note for note in deploy.notes)


def test_a_table_whose_smallest_batches_draft_less_than_its_largest_k_is_refused_and_deployed_static() -> None:
    rising = table(4, [(1, 4, 2), (5, 64, 4)])
    with pytest.raises(InputError, match=r"drafts max_draft_len.*K=2 for \[1, 4\]"):
        TRTLLMLauncher.speculative_options(rising)
    deploy = TRTLLMLauncher().deploy_config(rising, static_k(2), 64)
    assert deploy is not None and not deploy.dynamic and deploy.k == 2
    assert "static K=2 at every batch size" in deploy.notes[0]
