"""The live-fault campaign as data: each case two fake vLLM servers (a speculating candidate and its
speculation-off baseline, tests/fakeengine) with the faults the case sets on them, the `specmeter run` flags that
attach to them, the exit code and words the run must end with and, where the run stops, the fix made to the
servers before `specmeter resume` completes it. The commands in `then` run afterwards on the run and must succeed.

Request faults (fakeengine/faults.py) are set as the server's default fault, so every request meets it; server
faults are FakeEngine settings. Exit codes: 0 done, 2 refused before measuring (input), 4 stopped with what was
measured kept (a run that cannot go on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Settings = dict[str, Any]
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4}'


@dataclass(frozen=True)
class LiveCase:
    id: str
    candidate: Settings = field(default_factory=dict)  # the candidate server's FakeEngine settings
    baseline: Settings = field(default_factory=dict)  # the baseline's (always without a speculative config)
    flags: tuple[str, ...] = ()  # more `specmeter run` flags
    exit: int = 0
    words: tuple[str, ...] = ()  # the run's last line of output holds each
    fixed: Settings | None = None  # set on the candidate's server after the run; then `resume` must complete it
    fixed_baseline: Settings | None = None  # the same, on the baseline's server
    then: tuple[tuple[str, ...], ...] = ()  # commands on the run directory (RUN) afterwards, each exiting 0
    refuses: tuple[tuple[str, ...], str] | None = None  # a command afterwards that refuses (exit 2), and its words
    resume_refused: str | None = None  # the fix makes the server another than the run measured: `resume` refuses
    spec: str = NGRAM  # the --spec the candidate is given
    same_url: bool = False  # the baseline given as the candidate's own URL


STOPPED = 4
REFUSED = 2
CLEAR = {"default_fault": None}
AFTER = (("report", "RUN", "--recompute", "-q"), ("recommend", "RUN"))

# Every request the candidate's server answers fails this way: the error-rate stop ends the run (exit 4) naming the
# last error, everything measured is kept, and a resume against the fixed server completes it. Each fault's words
# are from the error specmeter records for it.
FAILING = {
    "timeout": "request timed out", "stall": "request timed out", "http_400": "HTTP 400",
    "http_401_echo_key": "HTTP 401", "http_429": "HTTP 429", "http_500": "HTTP 500", "reset": "last error",
    "disconnect": "last error", "malformed": "not JSON", "malformed_deep": "last error",
    "malformed_bigint": "last error", "bad_finish_reason": "finish_reason is",
    "bad_usage_type": "not a token count", "no_usage": "no usage in the stream",
    "zero_usage": "usage says 0 completion tokens", "incomplete": "last error",
    "stream_error": "server error in stream",
}

CASES: list[LiveCase] = [
    *(LiveCase(f"every request: {fault}", candidate={"default_fault": fault, "stall_s": 3.0}, exit=STOPPED,
               words=("stopped early", kind), fixed=CLEAR, then=AFTER) for fault, kind in FAILING.items()),
    # One request of the candidate's fails mid-run: the run completes, the failure counted, not the speedup's.
    *(LiveCase(f"one request: {fault}", candidate={"schedule": {2: fault}, "stall_s": 3.0}, then=AFTER)
      for fault in ("reset", "http_500", "malformed", "stall", "zero_usage")),
    # The server a stopped run resumes against serves another model than the run measured there: refused.
    LiveCase("resumed against a server of another model", candidate={"default_fault": "http_500"}, exit=STOPPED,
             words=("stopped early", "HTTP 500"), fixed={"default_fault": None, "model": "fake/other"},
             resume_refused="fake/other"),
    LiveCase("the baseline's requests all fail", baseline={"default_fault": "http_500"}, exit=STOPPED,
             words=("stopped early", "HTTP 500"), fixed_baseline=CLEAR, then=AFTER),
    # A content delta of the wrong type is dropped (the usage still counts the tokens): the run goes on.
    LiveCase("every content delta a number", candidate={"default_fault": "bad_content_type"}, then=AFTER),
    LiveCase("slow chunks within the timeout", candidate={"default_fault": "slow", "slow_chunk_s": 0.01},
             then=AFTER),
    # Server-wide faults: the run goes on, reading SD where it can (per-request stats, the other counters).
    LiveCase("counters restart mid-point", candidate={"restart_after_requests": 3}, then=AFTER),
    LiveCase("counters restart at a scrape", candidate={"restart_on_scrape": 2}, then=AFTER),
    LiveCase("counters restart between a point's traffic and its closing scrape",
             candidate={"restart_on_idle_scrape": 3}, then=AFTER),
    LiveCase("only the per-position SD series shown", candidate={"hide_sd": "required"}, then=AFTER),
    # The checks before the run read the first scrapes (a server without SD series is refused there, below).
    LiveCase("SD series vanish mid-run", candidate={"hide_sd": "all", "hide_sd_from_scrape": 5}, then=AFTER),
    LiveCase("phantom traffic beside the run", candidate={"foreign_per_request": 1}, then=AFTER),
    LiveCase("per-request stats claim more accepted than counted", candidate={"lie_extra_accepted": 2},
             then=AFTER),
    LiveCase("no per-request stats", candidate={"per_request_stats": False}, then=AFTER),
    LiveCase("/metrics answers garbage", candidate={"garbage_metrics": True}, then=AFTER),
    LiveCase("a proxy echoes the API key", candidate={"echo_auth": True, "api_key": "sk-live-123"},
             baseline={"api_key": "sk-live-123"}, flags=("--api-key", "sk-live-123"), then=AFTER),
    LiveCase("accepted above drafted", candidate={"impossible_metrics": "accepted_over_drafted"}, then=AFTER),
    LiveCase("+Inf counters", candidate={"impossible_metrics": "inf_counters"}, then=AFTER),
    LiveCase("a NaN running gauge", candidate={"impossible_metrics": "nan_gauge"}, then=AFTER),
    LiveCase("a full engine queues requests", candidate={"max_num_seqs": 1}, then=AFTER),
    # A server labelled K = 4 that drafts 2 a step: measured as it is, but no table names a K it does not run.
    LiveCase("a server labelled K = 4 drafting 2 a step", candidate={"k": 2},
             spec='{"method": "draft_model", "num_speculative_tokens": 4, "draft_model": "fake/draft"}',
             then=(("report", "RUN", "--recompute", "-q"),),
             refuses=(("recommend", "RUN"), "drafted 2 tokens a step where draft_model K = 4 was given")),
    # A proxy that routes the candidate's requests to a server of another model: no answer of it is a measurement.
    LiveCase("chunks name another model", candidate={"answer_model": "fake/other"}, exit=STOPPED,
             words=("stopped early", "another server answered"), fixed={"answer_model": None}, then=AFTER),
    LiveCase("a restarted engine that had served traffic before", candidate={"prior_requests": 5}, then=AFTER),
    # Servers that are not what the run is told: refused before anything is sent (exit 2, no run directory).
    LiveCase("the baseline is the candidate's own URL", same_url=True, exit=REFUSED, words=("same server",)),
    LiveCase("the baseline drafts", baseline={"hide_sd": None, "per_request_stats": True}, exit=REFUSED,
             words=("runs speculative decoding",)),
    LiveCase("the baseline serves another model", baseline={"model": "fake/other"}, exit=REFUSED,
             words=("serves fake/other",)),
    LiveCase("the candidate runs no speculation", candidate={"hide_sd": "all", "per_request_stats": False},
             exit=REFUSED, words=("runs no speculative decoding",)),
    LiveCase("a key the servers ask for is not given", candidate={"api_key": "sk-1"}, baseline={"api_key": "sk-1"},
             exit=REFUSED, words=("refused the request (401)", "--api-key")),
    LiveCase("the wrong key", candidate={"api_key": "sk-1"}, baseline={"api_key": "sk-1"},
             flags=("--api-key", "sk-2"), exit=REFUSED, words=("refused the request (401)",)),
]
