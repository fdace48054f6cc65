"""Running specmeter against a fake engine: workloads, attach-mode executions, a reporter that keeps what it
is told, and small readers of the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specmeter.config.models import ConcurrencyPoint, EngineSpec, LoadSpec, SpecConfig
from specmeter.data.model import Conversation
from specmeter.execution.runner import Execution, Reporter, execute
from specmeter.load.point import count_requests, point_conversations
from specmeter.plans.run import run_plan as build_run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


def conversations(turns: list[list[str]] | list[str], prefix: str = "c") -> list[Conversation]:
    """Conversations from turn lists (a plain string is a one-turn conversation)."""
    return [Conversation(id=f"{prefix}{i:03d}", category=f"cat{i % 2}", turns=[t] if isinstance(t, str) else t)
            for i, t in enumerate(turns)]


def _attach_execution(url: str | list[str], baseline_url: str | None, convs: list[Conversation], k: int,
                      api_key: str | None, workload: WorkloadSelection | None, repeats: int, interleave: bool,
                      load: dict[str, Any], max_num_seqs: int | None = None) -> Execution:
    load.setdefault("warmup", 0)
    load.setdefault("max_tokens", 32)
    spec = SpecConfig(method="ngram", num_speculative_tokens=k)
    plan = build_run_plan(EngineSpec(endpoint=url, max_num_seqs=max_num_seqs), spec, LoadSpec(**load),
                          baseline=baseline_url is not None,
                          baseline_endpoint=baseline_url,
                          workload=workload or WorkloadSelection(dataset="fault-server-test"),
                          repeats=repeats, interleave=interleave)
    flags = [arg for u in ([url] if isinstance(url, str) else url) for arg in ("--endpoint", u)]
    return Execution(plan=plan, conversations=convs, api_key=api_key, command=["specmeter", "run", *flags])


def attach_plan(url: str | list[str], convs: list[Conversation], k: int = 4, api_key: str | None = None,
                **load: Any) -> Execution:
    """An attach-mode Execution against `url` (a list: replicas of one server): one configuration, ngram K=k
    (id "ngram-k<k>"), no baseline (warmup 0 unless given)."""
    return _attach_execution(url, None, convs, k, api_key, None, 1, False, load)


def attach_pair(url: str, baseline_url: str, convs: list[Conversation], k: int = 4,
                workload: WorkloadSelection | None = None, repeats: int = 1, interleave: bool = False,
                max_num_seqs: int | None = None, **load: Any) -> Execution:
    """An attach-mode Execution of two configurations: ngram K=k at `url`, then the baseline at
    `baseline_url` (warmup 0 unless given). `workload`: the WorkloadSelection the plan stores; `max_num_seqs`: the
    servers' batch capacity, as a user states it (None: unstated)."""
    return _attach_execution(url, baseline_url, convs, k, None, workload, repeats, interleave, load, max_num_seqs)


def attach_execution(url: str, kind: str | None, api: str, dataset: str) -> Execution:
    """An attach-mode run of an EAGLE3 candidate (K = 4) on `url` at concurrency 2, with the engine given
    (`kind`) or left to detection (None): six short questions, 24 tokens each, no warm-up, no baseline."""
    convs = conversations([f"Question {i}: explain how caches work, briefly." for i in range(6)])
    plan = build_run_plan(EngineSpec(kind=kind, endpoint=url),
                          SpecConfig(method="eagle3", num_speculative_tokens=4, draft_model="org/e3"),
                          LoadSpec(concurrency=[2], warmup=0, max_tokens=24, api=api), baseline=False,
                          baseline_endpoint=None, workload=WorkloadSelection(dataset=dataset))
    return Execution(plan=plan, conversations=convs, api_key=None, command=["specmeter", "run", "--endpoint", url])


class RecordingReporter(Reporter):
    """A silent reporter that keeps every finished record and point it is told about."""

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.points: list[tuple[Any, Any]] = []  # (PlannedConfig, PointResult) as each point finished
        self.started: list[tuple[str, str, int, int | None]] = []  # (config id, point id, repeat, requests)
        self.total_requests: int | None = None
        self.notes: list[str] = []

    def plan_start(self, plan: Any, total_requests: int | None) -> None:
        self.total_requests = total_requests

    def point_start(self, config: Any, point: Any, repeat: int, total: int | None) -> None:
        self.started.append((config.id, point.id, repeat, total))

    def request_done(self, record: Any) -> None:
        self.records.append(record)

    def point_done(self, config: Any, result: Any) -> None:
        self.points.append((config, result))

    def note(self, message: str) -> None:
        self.notes.append(message)


def run_plan(ex: Execution, root: Path) -> tuple[Any, BaseException | None, RecordingReporter]:
    """specmeter.execution.runner.execute of the Execution `ex` into `root`; returns (summary or None, the exception
    or None, reporter)."""
    reporter = RecordingReporter()
    try:
        return execute(ex, RunStore(root), reporter), None, reporter
    except Exception as exc:  # the tests look at it
        return None, exc, reporter


def only_config(summary: RunSummary) -> Any:
    """The one configuration an attach_plan run measured."""
    (config,) = summary.configs
    return config


def point_requests(convs: list[Conversation], concurrency: int) -> int:
    """Requests a closed-loop point of `concurrency` sends for `convs` (the workload cycled up to the floor)."""
    return count_requests(point_conversations(convs, ConcurrencyPoint(concurrency=concurrency), LoadSpec()))


def negative_numbers(obj: Any, path: str = "$") -> list[str]:
    """Paths of every negative number in a JSON-like object."""
    out: list[str] = []
    if isinstance(obj, dict):
        for key, val in obj.items():
            out += negative_numbers(val, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, val in enumerate(obj):
            out += negative_numbers(val, f"{path}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj < 0:
        out.append(f"{path}={obj}")
    return out


def max_overlap(records: list[RequestRecord]) -> int:
    """The most requests in flight at once, from the records' send and end times."""
    events = sorted([(r.start_s, 1) for r in records] + [(r.end_s or r.start_s, -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, delta in events:
        now += delta
        most = max(most, now)
    return most
