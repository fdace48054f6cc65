"""The TensorRT-LLM engine: trtllm-serve command and its YAML from SpecConfig, Prometheus counters (with and
without per-position counters), the JSON iteration stats of /metrics in both field-name styles, per-request
stats in the shape of TensorRT-LLM PR #19311, engine detection, and a whole attach-mode run against the
fake engine in trtllm-serve's shapes (/health, /v1/models with owned_by tensorrt_llm, JSON
iteration stats at /metrics cleared by every read, Prometheus text at /prometheus/metrics, streaming chat
and completions with no SD numbers in them)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fakeengine.drive import attach_execution, only_config, run_plan
from fakeengine.server import FakeEngine
from fakeengine.trtllm import TensorRTLLM
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.base import ServerProbe
from specmeter.engines.registry import detect_engine
from specmeter.engines.sglang import SGLangStats
from specmeter.engines.trtllm import CONFIG_DIR_ENV, PROMETHEUS_PATH, TRTLLMLauncher, TRTLLMStats, positions
from specmeter.engines.trtllm_iterations import IterationStats, iteration_entries
from specmeter.engines.vllm import VLLMStats
from specmeter.load.client import OpenAIClient
from specmeter.metrics.sd_summary import summarize_sd
from specmeter.rundir.store import load_summary
from specmeter.schemas.sd import SDCounts, SDSummary
from specmeter.telemetry.feed import FeedPoller, replay
from specmeter.telemetry.prometheus import counter_delta, parse_exposition
from specmeter.workflows.recompute import recompute

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "trtllm-configs"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(path))
    return path


def _cmd(spec: SpecConfig, engine: EngineSpec | None = None) -> list[str]:
    engine = engine or EngineSpec(kind="trtllm", model="org/target")
    return TRTLLMLauncher().server_command(engine, spec, 8001)


def _yaml(cmd: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = yaml.safe_load(Path(cmd[cmd.index("--extra_llm_api_options") + 1]).read_text())
    return options


# ---- launch command and YAML -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "decoding_type", "draft"),
    [("eagle3", "Eagle3", "org/e3"), ("draft_model", "DraftTarget", "org/small"), ("ngram", "NGram", None),
     ("mtp", "MTP", None)],
)
def test_every_method_gets_its_decoding_type_and_k(method: str, decoding_type: str, draft: str | None,
                                                   config_dir: Path) -> None:
    cmd = _cmd(SpecConfig(method=method, num_speculative_tokens=3, draft_model=draft))
    assert Path(cmd[0]).name == "trtllm-serve" and cmd[1] == "org/target"
    assert cmd[cmd.index("--backend") + 1] == "pytorch" and cmd[cmd.index("--port") + 1] == "8001"
    options = _yaml(cmd)
    assert Path(cmd[cmd.index("--extra_llm_api_options") + 1]).parent == config_dir
    assert options["enable_iter_perf_stats"] is True and options["return_perf_metrics"] is True
    spec_cfg = options["speculative_config"]
    assert spec_cfg["decoding_type"] == decoding_type and spec_cfg["max_draft_len"] == 3
    assert spec_cfg.get("speculative_model_dir") == draft
    if method == "mtp":
        assert spec_cfg["num_nextn_predict_layers"] == 3
    # the docs run the two-model drafters without the overlap scheduler
    assert options.get("disable_overlap_scheduler", False) is (method in ("draft_model", "ngram"))


def test_engine_settings_and_extra_reach_the_command_and_the_yaml() -> None:
    engine = EngineSpec(kind="trtllm", model="org/target", dtype="bfloat16", max_model_len=4096, max_num_seqs=16,
                        trust_remote_code=True, extra_args=["--tp_size", "2"])
    spec = SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_max=3, extra={"is_public_pool": False})
    cmd = _cmd(spec, engine)
    assert cmd[cmd.index("--max_seq_len") + 1] == "4096" and cmd[cmd.index("--max_batch_size") + 1] == "16"
    assert "--trust_remote_code" in cmd and cmd[-2:] == ["--tp_size", "2"]
    options = _yaml(cmd)
    assert options["dtype"] == "bfloat16"
    assert options["speculative_config"] == {"decoding_type": "NGram", "max_draft_len": 4,
                                             "max_matching_ngram_size": 3, "is_public_pool": False}


def test_the_yaml_path_follows_its_content(config_dir: Path) -> None:
    a = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=3, draft_model="org/e3"))
    b = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=3, draft_model="org/e3"))
    c = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=4, draft_model="org/e3"))
    assert a == b and a != c  # same config, same command (and file); another K, another file
    off = _yaml(_cmd(SpecConfig()))
    assert off == {"enable_iter_perf_stats": True, "return_perf_metrics": True}
    assert sorted(p.name.startswith("llm-api-options-") for p in config_dir.iterdir()) == [True] * 3


@pytest.mark.parametrize("method", ["suffix", "eagle"])
def test_a_method_trtllm_lacks_is_refused_with_the_supported_list(method: str) -> None:
    spec = SpecConfig(method=method, num_speculative_tokens=4, draft_model="d" if method == "eagle" else None)
    with pytest.raises(InputError, match=rf"trtllm cannot run speculation method '{method}'; it supports: "
                                         r"eagle3, draft_model, ngram, mtp"):
        _cmd(spec)


@pytest.mark.parametrize("spec", [
    SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_min=2),
    SpecConfig(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=[[1, 4, 2]]),
    SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d", draft_tensor_parallel_size=1),
])
def test_settings_trtllm_cannot_honour_are_refused(spec: SpecConfig) -> None:
    with pytest.raises(InputError):
        _cmd(spec)


def test_version_reads_the_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as md

    def fake(dist: str) -> str:
        if dist == "tensorrt_llm":
            return "1.3.0"
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "version", fake)
    assert TRTLLMLauncher().version() == "tensorrt_llm 1.3.0"

    def missing(dist: str) -> str:
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "version", missing)
    assert TRTLLMLauncher().version() is None


# ---- Prometheus counters ---------------------------------------------------------------------------------
def _prom(drafted_pos: list[int] | None, accepted_pos: list[int] | None, drafted: int, accepted: int,
          done: int = 3) -> str:
    lines = [
        "# TYPE trtllm_spec_decode_num_draft_tokens counter",
        f'trtllm_spec_decode_num_draft_tokens_total{{engine_type="trtllm",model_name="m"}} {drafted}.0',
        "# TYPE trtllm_spec_decode_num_accepted_tokens counter",
        f'trtllm_spec_decode_num_accepted_tokens_total{{engine_type="trtllm",model_name="m"}} {accepted}.0',
        "# TYPE trtllm_request_success counter",
        f'trtllm_request_success_total{{engine_type="trtllm",finished_reason="stop",model_name="m"}} {done}.0',
        "# TYPE trtllm_num_requests_running gauge",
        'trtllm_num_requests_running{engine_type="trtllm",model_name="m"} 2.0',
    ]
    if drafted_pos is not None and accepted_pos is not None:
        lines.append("# TYPE trtllm_spec_decode_drafted_tokens counter")
        lines += [f'trtllm_spec_decode_drafted_tokens_total{{model_name="m",token_position="{i}"}} {v}.0'
                  for i, v in enumerate(drafted_pos)]
        lines.append("# TYPE trtllm_spec_decode_accepted_tokens counter")
        lines += [f'trtllm_spec_decode_accepted_tokens_total{{model_name="m",token_position="{i}"}} {v}.0'
                  for i, v in enumerate(accepted_pos)]
    return "\n".join(lines) + "\n"


def test_per_position_counters_give_steps_and_positions() -> None:
    stats = TRTLLMStats()
    before = parse_exposition(_prom([10, 10, 10], [8, 5, 2], 30, 15))
    after = parse_exposition(_prom([30, 30, 30], [20, 12, 5], 90, 37))
    sd = stats.sd_from_counters(counter_delta(before, after, stats.sd_counter_names))
    assert sd is not None and sd.source == "counters"
    assert (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (20, 60, 22)
    assert sd.accepted_per_pos == [12, 7, 3] and sd.drafted_per_pos == [20, 20, 20]
    assert sd.acceptance_length == pytest.approx(1 + 22 / 20)
    assert sd.per_position_rate == pytest.approx([0.6, 0.35, 0.15])


def test_without_per_position_counters_steps_are_unknown() -> None:
    stats = TRTLLMStats()
    delta = counter_delta(parse_exposition(_prom(None, None, 30, 15)), parse_exposition(_prom(None, None, 90, 37)),
                          stats.sd_counter_names)
    sd = stats.sd_from_counters(delta)
    assert sd is not None and sd.num_steps is None and (sd.num_draft_tokens, sd.num_accepted_tokens) == (60, 22)
    assert sd.acceptance_length is None and sd.acceptance_rate == pytest.approx(22 / 60)


def test_counters_that_went_down_or_do_not_add_up_give_none() -> None:
    stats = TRTLLMStats()
    high, low = parse_exposition(_prom([30], [20], 30, 20)), parse_exposition(_prom([10], [5], 10, 5))
    assert stats.sd_from_counters(counter_delta(high, low, stats.sd_counter_names)) is None
    liar = parse_exposition(_prom([10], [40], 10, 40))
    assert stats.sd_from_counters(counter_delta(low, liar, stats.sd_counter_names)) is None


def test_positions_reads_either_label_name() -> None:
    assert positions({"token_position=0": 5, "token_position=2": 1}) == [5, 0, 1]
    assert positions({"position=1": 2, "position=0": 3}) == [3, 2]
    assert positions({"": 4}) == []


def test_stats_names_and_what_is_not_available() -> None:
    stats = TRTLLMStats()
    assert stats.metrics_path == PROMETHEUS_PATH == "/prometheus/metrics"
    assert stats.traffic_counter_names == {"requests": "trtllm_request_success_total",
                                           "generation_tokens": "trtllm_generation_tokens_total"}
    assert stats.running_gauge == "trtllm_num_requests_running"  # read at metrics_path like the counters
    assert set(stats.unavailable) == {"per-request and per-category SD",
                                      "steps, AL and per-position rates from counters"}
    assert stats.request_extensions(0.0) == {}


# ---- JSON iteration stats --------------------------------------------------------------------------------
def _iteration(i: int, drafted: int, accepted: int, requests: int, snake: bool = False) -> dict[str, Any]:
    spec = {"numDraftTokens": drafted, "numAcceptedTokens": accepted, "numRequestsWithDraftTokens": requests,
            "acceptanceLength": (accepted + requests) / requests if requests else 0.0, "iterLatencyMS": 1.0,
            "draftOverhead": 0.2}
    if snake:
        spec = {"num_draft_tokens": drafted, "num_accepted_tokens": accepted,
                "num_requests_with_draft_tokens": requests, "acceptance_length": spec["acceptanceLength"]}
        return {"iter": i, "iter_latency_ms": 5.0, "spec_decoding_stats": spec}
    return {"iter": i, "iterLatencyMS": 5.0, "numActiveRequests": requests, "specDecodingStats": spec}


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_iteration_stats_sum_to_run_totals(snake: bool) -> None:
    first = [_iteration(1, 0, 0, 0, snake), _iteration(2, 8, 5, 2, snake)]
    second = [json.dumps(_iteration(3, 12, 4, 3, snake)), _iteration(2, 8, 5, 2, snake)]  # strings; one again
    acc = IterationStats()  # every /metrics answer read through the run, in any order
    for payload in (first, second):
        acc.add(payload)
    sd = acc.counts()
    assert sd is not None and (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (5, 20, 9)
    assert sd.acceptance_length == pytest.approx(1 + 9 / 5)


def test_iteration_stats_recover_steps_from_acceptance_length_and_count_gaps() -> None:
    acc = IterationStats()
    no_count = {"iter": 7, "specDecodingStats": {"numDraftTokens": 12, "numAcceptedTokens": 6, "acceptanceLength": 3.0}}
    acc.add([no_count, _iteration(10, 4, 1, 1)])
    sd = acc.counts()
    assert sd is not None and sd.num_steps == 3 + 1  # 6 / (3.0 - 1) = 3 requests
    assert acc.missing == 2  # iterations 8 and 9 were never read
    unknowable = IterationStats()
    unknowable.add([{"specDecodingStats": {"numDraftTokens": 4, "numAcceptedTokens": 0}}])
    sd = unknowable.counts()
    assert sd is not None and sd.num_steps is None and sd.num_draft_tokens == 4
    assert IterationStats().counts() is None
    assert iteration_entries("not json") == [] and iteration_entries({"iter": 1}) == [{"iter": 1}]


# ---- per request (PR #19311 shape) -------------------------------------------------------------------------
def test_per_request_stats_are_read_where_the_open_change_puts_them() -> None:
    stats = TRTLLMStats()
    spec = {"acceptance_rate": 0.5, "total_accepted_draft_tokens": 30, "total_draft_tokens": 60,
            "num_spec_steps": 20, "acceptance_histogram": [8, 0, 6, 6], "num_spec_tokens": 3}
    on_choice = {"choices": [{"index": 0, "finish_reason": "stop", "speculative_decoding": spec}]}
    sd, raw = stats.sd_from_response(on_choice)
    assert sd is not None and raw == spec
    assert (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (20, 60, 30)
    assert sd.accepted_per_pos == [12, 12, 6] and sd.acceptance_length == pytest.approx(2.5)
    no_steps = {"total_accepted_draft_tokens": 3, "total_draft_tokens": 9}
    sd, _ = stats.sd_from_response({"choices": [], "usage": {"completion_tokens": 5, "speculative_decoding": no_steps}})
    assert sd is not None and sd.num_steps is None and sd.acceptance_rate == pytest.approx(1 / 3)
    assert stats.sd_from_response({"choices": [], "usage": {"completion_tokens": 5}}) == (None, None)


# ---- detection -------------------------------------------------------------------------------------------
VLLM_METRICS = """\
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5.0
"""


def _probe(metrics: str | None, owner: str | None) -> ServerProbe:
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]} if owner else None
    return ServerProbe(url="http://x", models=models, metrics=parse_exposition(metrics) if metrics else None,
                       server_header="uvicorn")


def test_trtllm_is_recognised_by_its_models_listing_or_its_prometheus_names() -> None:
    stats = TRTLLMStats()
    assert stats.can_adapt(_probe(None, "tensorrt_llm"))  # its /metrics is JSON: the probe parses none
    assert stats.can_adapt(_probe(_prom([1], [1], 1, 1), None))
    assert not stats.can_adapt(_probe(VLLM_METRICS, "vllm"))
    assert not stats.can_adapt(_probe(None, "sglang"))
    assert not VLLMStats().can_adapt(_probe(None, "tensorrt_llm"))
    assert not SGLangStats().can_adapt(_probe(_prom([1], [1], 1, 1), "tensorrt_llm"))
    assert detect_engine(_probe(None, "tensorrt_llm")) == "trtllm"


# ---- whole runs against the trtllm-serve-shaped fake engine ---------------------------------------------------
def _run(server: FakeEngine, root: Path, kind: str | None = "trtllm", api: str = "chat") -> SDSummary:
    """A whole attach-mode run against `server`; the point's SD summary, after what every run must show."""
    summary, error, _ = run_plan(attach_execution(server.url, kind, api, "trtllm-fake"), root)
    assert error is None, repr(error)
    point = only_config(summary).points[0]
    assert point.latency.num_ok == server.true_totals.requests == len(server.completion_requests()) > 0
    sd: SDSummary = point.sd
    assert sd.per_request is None and sd.requests_with_stats == 0  # no SD numbers in trtllm-serve responses
    assert sd.foreign_traffic is None
    assert set(sd.not_available) == set(TRTLLMStats().unavailable)
    # the run read the JSON list right before the point and once after it: nothing is left in it
    assert _paths(server).count("/metrics") >= 2 and json.loads(_get(server.url + "/metrics")) == []
    # the feed's reads are in the capture as they came: summarizing them again gives the same SD
    recompute(root)
    assert only_config(load_summary(root)).points[0].sd == sd
    return sd


def _totals(counts: SDCounts | None) -> tuple[int | None, int, int]:
    assert counts is not None
    return counts.num_steps, counts.num_draft_tokens, counts.num_accepted_tokens


def _truth(server: FakeEngine) -> tuple[int, int, int]:
    truth = server.true_totals
    return truth.steps, truth.drafted, truth.accepted


def _paths(server: FakeEngine) -> list[str]:
    return [r.path for r in server.log]


def _trtllm(server: FakeEngine) -> TensorRTLLM:
    personality = server.personality
    assert isinstance(personality, TensorRTLLM)
    return personality


FEED_AGREES = "the iteration stats of /metrics equal the /prometheus/metrics counter deltas"


def _check_run(server: FakeEngine, root: Path, kind: str | None, api: str) -> None:
    before = parse_exposition(server.scrape())
    sd = _run(server, root, kind, api)
    truth = server.true_totals
    assert sd.available and sd.reference == "counters", sd
    counters = sd.counters
    assert counters is not None
    assert _totals(counters) == _truth(server)
    assert counters.accepted_per_pos == truth.accepted_per_pos
    steps, _, accepted = _truth(server)
    assert counters.acceptance_length == pytest.approx(1 + accepted / steps)
    # both sources: the per-position counters are the run-level counts, the JSON iteration stats read
    # through the run are checked against them and agree
    assert sd.counters_invalid_reason is None
    assert sd.agree is True and sd.agreement == FEED_AGREES, sd.agreement
    # the aggregate counters (from iteration stats) say the same as the per-position ones
    delta = counter_delta(before, parse_exposition(server.scrape()), TRTLLMStats().sd_counter_names)
    assert round(delta.value("trtllm_spec_decode_num_draft_tokens_total", "engine_type=trtllm")) == truth.drafted


@pytest.mark.parametrize("kind", ["trtllm", None], ids=["given", "detected"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_run_against_trtllm_reads_its_prometheus_counters_and_its_iteration_stats(
        fake_trtllm: FakeEngine, tmp_path: Path, kind: str | None, api: str) -> None:
    _check_run(fake_trtllm, tmp_path / "run", kind, api)
    assert "/prometheus/metrics" in _paths(fake_trtllm)


@pytest.mark.parametrize("build", ["no-per-position-counters", "no-prometheus"])
def test_without_step_counters_sd_comes_from_the_iteration_stats_read_through_the_run(build: str,
                                                                                     tmp_path: Path) -> None:
    with FakeEngine(TensorRTLLM(per_position=False, prometheus=build != "no-prometheus"), step_s=0.002) as server:
        sd = _run(server, tmp_path / "run")
        assert _trtllm(server).evicted == 0
    assert sd.available and sd.reference == "counters", sd
    assert _totals(sd.counters) == _truth(server)
    assert sd.counters is not None and sd.counters.accepted_per_pos == []  # per-position rates: from nowhere
    steps, _, accepted = _truth(server)
    assert sd.counters.acceptance_length == pytest.approx(1 + accepted / steps)
    reason = sd.counters_invalid_reason or ""
    assert "run-level counts come from the iteration stats of /metrics" in reason, reason
    if build == "no-prometheus":
        assert "/prometheus/metrics could not be read" in reason
        assert sd.agree is None and sd.agreement is None  # nothing to check them against
    else:
        assert "the counters at /prometheus/metrics give no step count" in reason
        # drafted and accepted tokens are in both: checked, and equal
        assert sd.agree is True and sd.agreement == FEED_AGREES


@pytest.mark.parametrize("prometheus", [True, False], ids=["with-counters", "without-counters"])
def test_iterations_evicted_before_a_read_are_reported_never_undercounted(prometheus: bool, tmp_path: Path) -> None:
    # A list of 3 iterations and 20 ms steps: the polls every 0.5 s find it overrun.
    with FakeEngine(TensorRTLLM(capacity=3, prometheus=prometheus), step_s=0.02) as server:
        sd = _run(server, tmp_path / "run")
        evicted = _trtllm(server).evicted
        assert evicted > 0
    if prometheus:  # the per-position counters stay the run-level counts; the feed is reported, not used
        assert sd.available and sd.reference == "counters" and sd.counters_invalid_reason is None
        assert _totals(sd.counters) == _truth(server)
        text = sd.agreement or ""
        assert sd.agree is None
    else:  # nothing else counted the point: no SD numbers rather than an undercount
        assert not sd.available and sd.counters is None and sd.headline is None
        text = sd.reason or ""
    assert "the iteration stats of /metrics are incomplete, so not used" in text, text
    found = re.search(r"at least (\d+) iterations were evicted from /metrics before a read got them", text)
    assert found is not None and 0 < int(found.group(1)) <= evicted, text


def test_an_answer_that_is_not_json_is_recorded_as_lost(fake_trtllm: FakeEngine) -> None:
    trtllm = _trtllm(fake_trtllm)

    async def read_through() -> IterationStats:
        feed = TRTLLMStats().iteration_feed()
        async with OpenAIClient(fake_trtllm.url) as client:
            trtllm.record_iteration(3)  # before the point: read by the first read and not counted
            poller = FeedPoller(client.get_text, feed.path, time.perf_counter(), interval_s=0.02)
            async with poller:
                trtllm.record_iteration(2)
                trtllm.garble_next = 1  # its answer is cleared on the server, then lost
                for _ in range(200):
                    if trtllm.garbled:
                        break
                    await asyncio.sleep(0.01)
                trtllm.record_iteration(1)
        replay(feed, poller.reads)
        return feed

    feed = asyncio.run(read_through())
    assert trtllm.garbled == 1
    assert feed.lost and "not JSON" in feed.lost[0]
    assert _totals(feed.counts()) == (1, 4, 1)  # only what came after the garbled answer
    assert feed.missed == 1  # iteration 2 (the garbled one) is also a gap between 1 (the mark) and 3
    assert "could not be counted" in (feed.incomplete() or "")
    sd = summarize_sd(TRTLLMStats(), None, None, [], scrape_error="no counters here", feed=feed)
    assert not sd.available and "incomplete, so not used" in (sd.reason or "")


def test_the_mark_read_before_the_point_starts_the_gap_count() -> None:
    acc = IterationStats()
    acc.mark([_iteration(4, 8, 5, 2)])
    acc.add([_iteration(8, 4, 1, 1)])
    assert acc.missed == 3 and acc.counts() is not None  # 5, 6 and 7 were evicted before a read
    assert "at least 3 iterations were evicted" in (acc.incomplete() or "")
    fresh = IterationStats()
    fresh.mark([])  # nothing before the point: the gap count starts at the first iteration read
    fresh.add([_iteration(8, 4, 1, 1)])
    assert fresh.missed == 0 and fresh.incomplete() is None
    restarted = IterationStats()
    restarted.mark([_iteration(100, 4, 1, 1)])
    restarted.add([_iteration(1, 4, 1, 1), _iteration(2, 4, 1, 1)])  # numbers start again: no gap invented
    assert restarted.missed == 0


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        text: str = resp.read().decode()
        return text
