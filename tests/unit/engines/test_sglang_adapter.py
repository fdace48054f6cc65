"""The SGLang engine: launch command from SpecConfig, /metrics names, per-request stats in every name
generation, engine detection, and a whole attach-mode run against the fake engine in SGLang's
shapes (/health, /v1/models, /metrics, streaming chat and completions with `sglext.spec_tokens_details`
in a chunk of its own before the usage chunk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fakeengine.drive import attach_execution, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.base import ServerProbe
from specmeter.engines.registry import detect_engine, get_engine
from specmeter.engines.sglang import (
    RUNNING,
    VERIFY_CALLS,
    SGLangLauncher,
    SGLangStats,
    parse_spec_details,
)
from specmeter.engines.trtllm import TRTLLMStats
from specmeter.engines.vllm import VLLMStats
from specmeter.telemetry.prometheus import counter_delta, parse_exposition

pytestmark = pytest.mark.timeout(60)

ENGINE = EngineSpec(kind="sglang", model="org/target", port=30000)


def _cmd(spec: SpecConfig, engine: EngineSpec = ENGINE) -> list[str]:
    return SGLangLauncher().server_command(engine, spec, 30001)


def _flags(cmd: list[str]) -> dict[str, str | None]:
    """--flag value pairs of a command (bare flags map to None)."""
    out: dict[str, str | None] = {}
    for i, arg in enumerate(cmd):
        if arg.startswith("--"):
            nxt = cmd[i + 1] if i + 1 < len(cmd) else None
            out[arg] = None if nxt is None or nxt.startswith("--") else nxt
    return out


# ---- launch command -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "algorithm", "draft"),
    [("eagle", "EAGLE", "org/eagle"), ("eagle3", "EAGLE3", "org/eagle3"), ("draft_model", "STANDALONE", "org/small"),
     ("mtp", "EAGLE", None)],
)
def test_chain_drafters_set_steps_topk_and_verify_width_together(method: str, algorithm: str,
                                                                 draft: str | None) -> None:
    spec = SpecConfig(method=method, num_speculative_tokens=4, draft_model=draft)
    cmd = _cmd(spec)
    flags = _flags(cmd)
    assert cmd[1:3] == ["-m", "sglang.launch_server"]
    assert flags["--model-path"] == "org/target" and flags["--port"] == "30001" and "--enable-metrics" in flags
    assert flags["--speculative-algorithm"] == algorithm
    assert flags.get("--speculative-draft-model-path") == draft
    # one chain of K drafts: K steps, topk 1, verify width K + 1 (the root counts)
    assert (flags["--speculative-num-steps"], flags["--speculative-eagle-topk"],
            flags["--speculative-num-draft-tokens"]) == ("4", "1", "5")


def test_mtp_leaves_the_draft_path_to_sglang_unless_given() -> None:
    flags = _flags(_cmd(SpecConfig(method="mtp", num_speculative_tokens=2)))
    assert "--speculative-draft-model-path" not in flags
    flags = _flags(_cmd(SpecConfig(method="mtp", num_speculative_tokens=2, draft_model="org/target-mtp")))
    assert flags["--speculative-draft-model-path"] == "org/target-mtp"


def test_ngram_drafts_one_chain_of_k_and_maps_the_lookup_window() -> None:
    spec = SpecConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=5)
    flags = _flags(_cmd(spec))
    assert flags["--speculative-algorithm"] == "NGRAM"
    assert flags["--speculative-num-draft-tokens"] == "4"
    assert flags["--speculative-ngram-min-bfs-breadth"] == flags["--speculative-ngram-max-bfs-breadth"] == "1"
    assert flags["--speculative-ngram-min-match-window-size"] == "2"
    assert flags["--speculative-ngram-max-match-window-size"] == "5"
    assert "--speculative-num-steps" not in flags and "--speculative-eagle-topk" not in flags


def test_engine_settings_map_to_sglang_flags_and_extra_overrides() -> None:
    engine = EngineSpec(kind="sglang", model="org/target", dtype="bfloat16", max_model_len=4096, max_num_seqs=8,
                        served_model_name="target", trust_remote_code=True, extra_args=["--mem-fraction-static", "0.7"])
    spec = SpecConfig(method="eagle3", num_speculative_tokens=3, draft_model="org/e3",
                      extra={"speculative_draft_model_path": "org/e3-local", "speculative_token_map": "map.pt",
                             "enable_torch_compile": True})
    cmd = _cmd(spec, engine)
    flags = _flags(cmd)
    assert flags["--dtype"] == "bfloat16" and flags["--context-length"] == "4096"
    assert flags["--max-running-requests"] == "8" and flags["--served-model-name"] == "target"
    assert "--trust-remote-code" in flags
    assert "--enable-torch-compile" in flags and flags["--enable-torch-compile"] is None  # True: a bare flag
    assert flags["--speculative-draft-model-path"] == "org/e3-local"  # the same key overrides specmeter's value
    # (a tree's settings never ride in extra: SpecConfig refuses them, tests/unit/engines/test_tree_drafts.py)
    assert flags["--speculative-token-map"] == "map.pt"
    assert cmd[-2:] == ["--mem-fraction-static", "0.7"]


def test_speculation_off_runs_the_plain_server() -> None:
    cmd = _cmd(SpecConfig())
    assert not any(a.startswith("--speculative") for a in cmd) and "--enable-metrics" in cmd


def test_a_method_sglang_lacks_is_refused_with_the_supported_list() -> None:
    with pytest.raises(InputError, match=r"sglang cannot run speculation method 'suffix'; it supports: "
                                         r"eagle, eagle3, draft_model, ngram, mtp"):
        _cmd(SpecConfig(method="suffix", num_speculative_tokens=4))


@pytest.mark.parametrize("spec", [
    SpecConfig(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=[[1, 4, 4]]),
    SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d", draft_tensor_parallel_size=1),
    SpecConfig(method="eagle3", num_speculative_tokens=4, draft_model="d", prompt_lookup_max=3),
])
def test_settings_sglang_cannot_honour_are_refused(spec: SpecConfig) -> None:
    with pytest.raises(InputError):
        _cmd(spec)


def test_version_reads_the_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as md

    monkeypatch.setattr(md, "version", lambda dist: "0.5.9" if dist == "sglang" else md.version(dist))
    assert SGLangLauncher().version() == "sglang 0.5.9"

    def missing(dist: str) -> str:
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "version", missing)
    assert SGLangLauncher().version() is None


# ---- per-request stats in every name generation --------------------------------------------------------
HIST = [3, 2, 4, 1, 2]  # 12 steps, K = 4; accepted = 2 + 8 + 3 + 8 = 21
CURRENT = {"spec_verify_ct": 12, "spec_num_correct_drafts": 21, "spec_num_proposed_drafts": 48,
           "spec_correct_drafts_histogram": HIST, "spec_accept_rate": 21 / 48, "spec_accept_length": 2.9,
           "spec_cap_length": 0.0, "spec_block_accept_length": 0.0, "spec_cap_lens_histogram": []}
ALIASES = {"spec_verify_ct": 12, "spec_accepted_drafts": 21, "spec_proposed_drafts": 48,
           "spec_accept_histogram": HIST, "spec_accept_rate": 21 / 48}
OLDEST = {"spec_verify_ct": 12, "spec_accept_token_num": 21, "spec_draft_token_num": 48, "spec_accept_rate": 21 / 48,
          "spec_accept_length": 2.9}


@pytest.mark.parametrize("fields", [CURRENT, ALIASES, OLDEST], ids=["current", "aliases", "oldest"])
@pytest.mark.parametrize("where", ["sglext", "sglext_list", "meta_info", "choice_meta_info", "root"])
def test_every_name_generation_and_place_parses_to_the_same_counts(fields: dict[str, Any], where: str) -> None:
    payload: dict[str, Any] = {"id": "x", "choices": [], "usage": {"completion_tokens": 30}}
    if where == "sglext":
        payload["sglext"] = {"routed_experts": None, "spec_tokens_details": fields}
    elif where == "sglext_list":
        payload["sglext"] = {"spec_tokens_details": [fields, {**fields, "spec_verify_ct": 1}]}
    elif where == "meta_info":
        payload["meta_info"] = {"id": "x", "completion_tokens": 30, **fields}
    elif where == "choice_meta_info":
        payload["choices"] = [{"index": 0, "meta_info": fields}]
    else:
        payload.update(fields)
    sd, raw = SGLangStats().sd_from_response(payload)
    assert sd is not None and raw is not None
    assert (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (12, 48, 21)
    assert sd.acceptance_length == pytest.approx(1 + 21 / 12)  # never SGLang's completion_tokens / steps
    if "spec_draft_token_num" in fields:  # the oldest generation had no histogram
        assert sd.histogram is None and sd.accepted_per_pos == []
    else:
        assert sd.histogram == HIST and sd.accepted_per_pos == [9, 7, 3, 2]
        assert sd.num_accepted_tokens == sum(sd.accepted_per_pos)


def test_stats_that_do_not_add_up_or_are_absent_give_none() -> None:
    stats = SGLangStats()
    assert stats.sd_from_response({"choices": [], "usage": {"completion_tokens": 3}}) == (None, None)
    more_accepted_than_drafted = {"spec_verify_ct": 3, "spec_num_correct_drafts": 9, "spec_num_proposed_drafts": 6}
    assert parse_spec_details(more_accepted_than_drafted) is None
    assert parse_spec_details({"spec_verify_ct": 3}) is None  # nothing says what was drafted
    # no step verified: zeros, whatever defaults the other fields carry
    zero = parse_spec_details({"spec_verify_ct": 0, "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 0})
    assert zero is not None and (zero.num_steps, zero.num_draft_tokens) == (0, 0)
    # a histogram that does not cover the steps gives no per-position counts
    bad = parse_spec_details({**CURRENT, "spec_correct_drafts_histogram": [1, 1]})
    assert bad is not None and bad.histogram is None and bad.accepted_per_pos == []
    # accepted from the histogram when only it is there
    only_hist = parse_spec_details({"spec_verify_ct": 12, "spec_num_proposed_drafts": 48,
                                    "spec_correct_drafts_histogram": HIST})
    assert only_hist is not None and only_hist.num_accepted_tokens == 21


def test_requests_ask_for_the_spec_details() -> None:
    assert SGLangStats().request_extensions(0.0) == {"return_spec_tokens_details": True}
    assert SGLangStats().request_extensions(0.7) == {"return_spec_tokens_details": True}


# ---- /metrics ------------------------------------------------------------------------------------------
SGLANG_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 3.0
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="m",tp_rank="0"} 2.5
# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 40.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",is_streaming="true"} 100.0
sglang:generation_tokens_total{model_name="m",is_streaming="false"} 20.0
"""
OLD_SGLANG_METRICS = """\
# HELP sglang:num_requests_running Number of requests currently running on GPU
# TYPE sglang:num_requests_running gauge
sglang:num_requests_running{name="m"} 0.0
"""
VLLM_METRICS = """\
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
"""


def _probe(metrics: str | None, owner: str | None = None) -> ServerProbe:
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]} if owner else None
    return ServerProbe(url="http://x", models=models, metrics=parse_exposition(metrics) if metrics else None,
                       server_header=None)


def test_sglang_is_recognised_by_its_metrics_of_either_generation_or_its_models_listing() -> None:
    stats = SGLangStats()
    assert stats.can_adapt(_probe(SGLANG_METRICS))
    assert stats.can_adapt(_probe(OLD_SGLANG_METRICS))
    assert stats.can_adapt(_probe(None, "sglang"))
    assert not stats.can_adapt(_probe(VLLM_METRICS, "vllm"))
    assert not stats.can_adapt(_probe(None, "tensorrt_llm"))
    # and the other engines do not claim SGLang's server
    assert not VLLMStats().can_adapt(_probe(SGLANG_METRICS, "sglang"))
    assert not TRTLLMStats().can_adapt(_probe(SGLANG_METRICS, "sglang"))
    assert detect_engine(_probe(SGLANG_METRICS, "sglang")) == "sglang"
    assert detect_engine(_probe(None, "sglang")) == "sglang"


def test_counters_give_steps_summed_over_label_sets_and_never_token_counts() -> None:
    stats = SGLangStats()
    before = parse_exposition(SGLANG_METRICS)
    after = parse_exposition(SGLANG_METRICS.replace("} 40.0", "} 52.0"))
    assert stats.sd_enabled_in(after) and stats.sd_counter_names == [VERIFY_CALLS]
    delta = counter_delta(before, after, stats.sd_counter_names)
    assert sum(delta.series(VERIFY_CALLS).values()) == 12  # steps, summed over the label sets
    assert stats.sd_from_counters(delta) is None
    assert "SD from /metrics counters" in stats.unavailable
    assert stats.running_gauge == RUNNING == "sglang:num_running_reqs"
    assert stats.traffic_counter_names == {"requests": "sglang:num_requests_total",
                                           "generation_tokens": "sglang:generation_tokens_total"}
    zero = parse_exposition(SGLANG_METRICS.replace("} 40.0", "} 0.0"))
    assert not stats.sd_enabled_in(zero)
    assert not counter_delta(after, before, stats.sd_counter_names).valid  # went down: a restart


# ---- a whole run against the SGLang-shaped fake engine ------------------------------------------------
def _check_run(server: FakeEngine, root: Path, kind: str | None, api: str) -> None:
    before = parse_exposition(server.scrape())
    summary, error, _ = run_plan(attach_execution(server.url, kind, api, "sglang-fake"), root)
    after = parse_exposition(server.scrape())
    assert error is None, repr(error)
    config = only_config(summary)
    point = config.points[0]
    bodies = [r.body for r in server.completion_requests()]
    assert point.latency.num_ok == server.true_totals.requests == len(bodies) > 0
    assert all(b.get("return_spec_tokens_details") is True for b in bodies)
    assert point.running_batch is not None and point.running_batch.gauge == "sglang:num_running_reqs"
    sd = point.sd
    assert sd.available and sd.reference == "per_request", sd
    assert sd.counters is None  # SGLang has no token counters
    truth = server.true_totals
    assert sd.per_request is not None and sd.requests_with_stats == truth.requests
    assert (sd.per_request.num_steps, sd.per_request.num_draft_tokens, sd.per_request.num_accepted_tokens) == (
        truth.steps, truth.drafted, truth.accepted)
    # the one counter SGLang has agrees with the per-request step counts
    assert sum(counter_delta(before, after, [VERIFY_CALLS]).series(VERIFY_CALLS).values()) == truth.steps
    assert sd.per_request.acceptance_length == pytest.approx(1 + truth.accepted / truth.steps)
    assert sum(sd.per_request.accepted_per_pos) == truth.accepted
    assert "SD from /metrics counters" in sd.not_available


@pytest.mark.parametrize("kind", ["sglang", None], ids=["given", "detected"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_run_against_sglang_sums_its_per_request_stats(fake_sglang: FakeEngine, tmp_path: Path,
                                                         kind: str | None, api: str) -> None:
    _check_run(fake_sglang, tmp_path / "run", kind, api)
    assert get_engine("sglang").stats.name == "sglang"
