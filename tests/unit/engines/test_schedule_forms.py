"""A K table in each engine's own form (SGLang's below). TensorRT-LLM: speculative_config.draft_len_schedule, each
range's largest batch size to its K, checked against the rules TensorRT-LLM's llm_args.py
(DecodingBaseConfig.validate_draft_len_schedule_and_sort) enforces: keys >= 1, draft lengths in [0, max_draft_len],
the smallest key drafting max_draft_len; batches above the largest key draft 0 (max_concurrency is translated to
{max_concurrency: max_draft_len})."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines import sglang
from specmeter.engines.sglang import SGLangLauncher
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


# SGLang: a K table runs as adaptive speculation's per-batch-size tiers, checked against the rules SGLang's
# python/sglang/srt/speculative/adaptive_spec_params.py enforces: integer-string batch-size keys, candidate_steps a
# non-empty list of non-negative ints; a batch goes to the tier with the largest key at or below it.
def eagle3_table(k: int, ranges: list[tuple[int, int, int]]) -> SpecConfig:
    return SpecConfig.model_validate({"method": "eagle3", "draft_model": "/models/head", "num_speculative_tokens": k,
                                      "num_speculative_tokens_per_batch_size": ranges})


def sglang_accepts(config: dict[str, Any]) -> None:
    assert config and all(key.isdigit() for key in config)
    for entry in config.values():
        steps = entry["candidate_steps"]
        assert isinstance(steps, list) and steps and all(isinstance(s, int) and s >= 0 for s in steps)


def sglang_drafts_at(config: dict[str, Any], batch: int) -> list[int]:
    """The candidates SGLang chooses among at `batch` running requests: the tier at or below it (the first below)."""
    keys = sorted(int(k) for k in config)
    at = max((k for k in keys if k <= batch), default=keys[0])
    return list(config[str(at)]["candidate_steps"])


def test_a_three_range_table_is_sglangs_tiers_one_candidate_each() -> None:
    spec = eagle3_table(4, [(1, 4, 4), (5, 16, 2), (17, 64, 0)])
    config = json.loads(json.dumps(sglang.tiers(spec)))  # as the JSON file holds it
    sglang_accepts(config)
    for start, end, k in [(1, 4, 4), (5, 16, 2), (17, 64, 0)]:  # each range's whole span runs its K, 0 drafting none
        assert all(sglang_drafts_at(config, b) == [k] for b in range(start, end + 1))
    deploy = SGLangLauncher().deploy_config(spec, None, 64)
    assert deploy is not None and deploy.dynamic and deploy.config == config
    assert deploy.config_file in deploy.flags and "--speculative-adaptive" in deploy.flags
    assert deploy.flags[deploy.flags.index("--speculative-num-steps") + 1] == "4"


def test_a_launched_sglang_server_reads_the_tiers_from_the_file_its_command_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sglang.CONFIG_DIR_ENV, str(tmp_path))
    spec = eagle3_table(4, THREE_RANGES)
    cmd = SGLangLauncher().server_command(EngineSpec(model="m", kind="sglang"), spec, 8000)
    written = Path(cmd[cmd.index("--speculative-adaptive-config") + 1])
    assert written.parent == tmp_path and json.loads(written.read_text(encoding="utf-8")) == sglang.tiers(spec)
    assert "--speculative-adaptive" in cmd


def test_a_table_of_a_drafter_sglang_does_not_adapt_is_refused_in_one_line_and_deployed_static() -> None:
    with pytest.raises(InputError, match="EAGLE worker only"):
        SGLangLauncher.speculative_args(table(4, THREE_RANGES))  # a draft model: SGLang's STANDALONE
    deploy = SGLangLauncher().deploy_config(table(4, THREE_RANGES), static_k(2), 64)
    assert deploy is not None and not deploy.dynamic and deploy.k == 2
