"""The bad-input campaign as data: each case a command line (today's command names), what is done to the working
folder first, and words its one-line error must hold. The working folder holds RUN, a copy of a real demo run
(sweep + verification); paths in command lines are relative to the folder. Every case is refused before any
server starts: endpoints are unreachable (127.0.0.1:9) or model paths missing."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Edit = Callable[[Path], None]
DEAD = "http://127.0.0.1:9"  # nothing listens there: a case that got past its check could not reach a server
NO_MODEL = "/nonexistent/specmeter-model"
DEMO_TARGET = Path(__file__).resolve().parents[2] / "models" / "demo-target"


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    words: list[str]
    edits: list[Edit] = field(default_factory=list)

    @property
    def command(self) -> str:
        return self.argv[0]


# ---- edits made to the working folder before the command (work: the folder; RUN is work / "RUN")

def write(name: str, text: str) -> Edit:
    def edit(work: Path) -> None:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    return edit


def mkdir(name: str) -> Edit:
    return lambda work: (work / name).mkdir(parents=True, exist_ok=True)


def delete(name: str) -> Edit:
    return lambda work: (work / name).unlink()


def truncate(name: str, keep: int) -> Edit:
    def edit(work: Path) -> None:
        data = (work / name).read_bytes()
        (work / name).write_bytes(data[:keep])
    return edit


def edit_json(name: str, change: Callable[[Any], None]) -> Edit:
    def edit(work: Path) -> None:
        doc = json.loads((work / name).read_text(encoding="utf-8"))
        change(doc)
        (work / name).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return edit


def copy_json(source: str, name: str, change: Callable[[Any], None]) -> Edit:
    def edit(work: Path) -> None:
        doc = json.loads((work / source).read_text(encoding="utf-8"))
        change(doc)
        (work / name).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return edit


def drafter(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    """A change to the first drafter of a recommendation."""
    return lambda doc: change(doc["drafters"][0])


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


def _overlap(d: dict[str, Any]) -> None:
    d["ranges"][1]["start"] = 1  # the second range starts inside the first, ending before it starts


def _backwards(d: dict[str, Any]) -> None:
    d["ranges"] = list(reversed(d["ranges"]))


def _gap(d: dict[str, Any]) -> None:
    d["ranges"][1]["start"] += 1


def _short(d: dict[str, Any]) -> None:
    d["ranges"][-1]["end"] -= 1


def _table_differs(d: dict[str, Any]) -> None:
    d["ranges"][0]["k"] = 1  # the ranges say K=1 at batch 1..2, the spec still launches K=2


def _negative_k(d: dict[str, Any]) -> None:
    d["ranges"][1]["k"] = -1


def sweep_file(name: str, body: str) -> Edit:
    return write(name, body)


ATTACH = f"engine: {{endpoint: {DEAD}}}\nbaseline_endpoint: http://127.0.0.1:8\n"
LAUNCH_MISSING = f"engine: {{model: {NO_MODEL}}}\n"
NGRAM = "candidates:\n  - {method: ngram, num_speculative_tokens: 4}\n"
LOAD = "load: {concurrency: [1]}\n"
GOOD_SWEEP = "workload: {dataset: sample, num_prompts: 4}\n" + LAUNCH_MISSING + NGRAM + LOAD
REC = "RUN/recommendation.json"
SUMMARY = "RUN/summary.json"
REQUESTS = "RUN/requests.jsonl"
RUN_CONFIG = "engine:\n  endpoint: " + DEAD + "\n"


def trace_sweep(path: str, fmt: str | None = None) -> str:
    """A sweep that replays the trace at `path` (relative to the working folder) on the demo target: its trace is
    read before any server starts, so a bad row is refused by --dry-run as by a real run."""
    named = f", format: {fmt}" if fmt else ""
    return (f"workload:\n  dataset: sample\n  trace: {{path: {path}{named}}}\n"
            f"engine: {{model: {DEMO_TARGET}, max_model_len: 2048}}\n" + NGRAM + "load: {trace_scale: [1]}\n")


def trace_case(id: str, name: str, text: str, words: list[str], fmt: str | None = None) -> Case:
    """A trace whose bad row the replay must refuse in one line naming the file, the line, the field and the fix."""
    return Case(id, ["sweep", "s.yaml", "--dry-run"], words,
                [write(name, text), sweep_file("s.yaml", trace_sweep(name, fmt))])


MOONCAKE_ROW = '{"timestamp": 0, "input_length": 600, "output_length": 20, "hash_ids": [0, 1]}\n'
BAILIAN_ROW = ('{"chat_id": 0, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 8, '
               '"turn": 1, "type": "text", "hash_ids": [0, 1, 2]}\n')
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def run(*args: str) -> list[str]:
    return ["run", "--endpoint", DEAD, "--out", "out", *args]


CASES: list[Case] = [
    # ---------------------------------------------------------------- run
    Case("run-spec-not-json", run("--spec", "{method: ngram"), ["--spec", "not valid JSON"]),
    Case("run-spec-negative-k", run("--spec", '{"method": "ngram", "num_speculative_tokens": -1}'),
         ["num_speculative_tokens", ">= 1", "-1"]),
    Case("run-spec-unknown-key", run("--spec", '{"method": "ngram", "num_speculative_token": 4}'),
         ["unknown key 'num_speculative_token'", "did you mean 'num_speculative_tokens'"]),
    Case("run-spec-unknown-method", run("--spec", '{"method": "ngrams", "num_speculative_tokens": 4}'),
         ["method", "ngrams"]),
    Case("run-spec-list", run("--spec", "[1, 2]"), ["--spec", "mapping"]),
    Case("run-concurrency-word", run("--concurrency", "1,four"), ["--concurrency 1,four", "whole number", "1,4,16"]),
    Case("run-concurrency-zero", run("--concurrency", "0"), ["--concurrency 0", "positive", "1,4,16"]),
    Case("run-rate-word", run("--request-rate", "fast"), ["request rates", "0.5,2"]),
    Case("run-input-len-form", run("--input-len", "512"), ["LO:HI", "0:512"]),
    Case("run-engine-env-form", ["run", "--model", NO_MODEL, "--engine-env", "NOEQUALS", "--out", "out"],
         ["KEY=VALUE"]),
    Case("run-max-error-rate", run("--max-error-rate", "2"), ["max_error_rate", "<= 1"]),
    Case("run-slo-form", run("--slo", "ttft=500"), ["--slo", "unknown key 'ttft'", "ttft_ms"]),
    Case("run-slo-no-equals", run("--slo", "500"), ["--slo", "KEY=VALUE"]),
    Case("run-endpoint-no-scheme", ["run", "--endpoint", "localhost:8000", "--out", "out"],
         ["localhost:8000", "http://localhost:8000"]),
    Case("run-endpoint-bad-port", ["run", "--endpoint", "http://localhost:eighty", "--out", "out"],
         ["http://localhost:eighty", "numeric port"]),
    Case("run-endpoint-twice", ["run", "--endpoint", DEAD, "--endpoint", DEAD + "/", "--out", "out"],
         ["given twice"]),
    Case("run-missing-model", ["run", "--model", NO_MODEL, "--out", "out"], [NO_MODEL, "does not exist"]),
    Case("run-unknown-dataset", run("--dataset", "squad"), ["squad", "sample"]),
    Case("run-jsonl-no-path", run("--dataset", "jsonl"), ["jsonl", "needs a path"]),
    Case("run-jsonl-missing-file", run("--dataset", "jsonl", "--dataset-path", "nope.jsonl"),
         ["nope.jsonl", "not found"]),
    Case("run-jsonl-bad-row", run("--dataset", "jsonl", "--dataset-path", "d.jsonl"), ["d.jsonl", "line 2"],
         [write("d.jsonl", '{"prompt": "fine"}\n{"prompt": 7}\n')]),
    Case("run-unknown-dataset-option", run("--dataset-option", "lenght=4"), ["lenght", "accepted options"]),
    Case("run-random-input-range", run("--dataset", "random", "--input-len", "200:512"),
         ["200:512", "--dataset-option input_len=N"]),
    Case("run-gsm8k-missing", run("--dataset", "gsm8k", "--dataset-path", "gsm"), ["gsm", "not found"]),
    Case("run-gsm8k-jsonl-bad-line", run("--dataset", "gsm8k", "--dataset-path", "test.jsonl"),
         ["test.jsonl", "line 2"], [write("test.jsonl", '{"question": "q", "answer": "a"}\n{"question":\n')]),
    Case("run-config-missing", ["run", "--config", "nope.yaml", "--out", "out"], ["nope.yaml", "not found"]),
    Case("run-config-directory", ["run", "--config", "RUN", "--out", "out"], ["RUN", "directory"]),
    Case("run-config-bad-yaml", ["run", "--config", "c.yaml", "--out", "out"], ["c.yaml", "not valid YAML"],
         [write("c.yaml", "engine: [unclosed\n")]),
    Case("run-config-unknown-key", ["run", "--config", "c.yaml", "--out", "out"],
         ["unknown key 'modle'", "did you mean 'model'"], [write("c.yaml", RUN_CONFIG + "  modle: x\n")]),
    Case("run-config-wrong-type", ["run", "--config", "c.yaml", "--out", "out"],
         ["max_tokens", "whole number", "'lots'"], [write("c.yaml", RUN_CONFIG + "load:\n  max_tokens: lots\n")]),
    Case("run-config-unsafe-tag", ["run", "--config", "c.yaml", "--out", "out"], ["c.yaml"],
         [write("c.yaml", "engine: !!python/object/apply:os.system ['true']\n")]),
    Case("run-config-slo-string", ["run", "--config", "c.yaml", "--out", "out"],
         ["slo", "mapping", "ttft_ms", "'ttft_ms=5'"], [write("c.yaml", RUN_CONFIG + "load:\n  slo: ttft_ms=5\n")]),
    Case("run-bad-option", ["run", "--bogus"], ["--bogus", "run --help"]),

    # ---------------------------------------------------------------- sweep
    Case("sweep-file-is-directory", ["sweep", "RUN"], ["RUN", "directory", "YAML file"]),
    Case("sweep-file-missing", ["sweep", "none.yaml"], ["none.yaml", "not found"]),
    Case("sweep-candidate-typo", ["sweep", "s.yaml"], ["unknown key 'candidate'", "did you mean 'candidates'"],
         [sweep_file("s.yaml", ATTACH + "candidate:\n  - {method: ngram, num_speculative_tokens: 4}\n" + LOAD)]),
    Case("sweep-concurrency-word", ["sweep", "s.yaml"], ["concurrency", "'four'", "e.g. concurrency: [1, 4, 16]"],
         [sweep_file("s.yaml", LAUNCH_MISSING + NGRAM + "load: {concurrency: [1, four]}\n")]),
    Case("sweep-rate-word", ["sweep", "s.yaml"], ["request_rate", "'fast'", "0.5, 2"],
         [sweep_file("s.yaml", LAUNCH_MISSING + NGRAM + "load: {request_rate: [fast]}\n")]),
    Case("sweep-slo-string", ["sweep", "s.yaml"], ["load.slo", "mapping", "ttft_ms", "'ttft_ms=500'"],
         [sweep_file("s.yaml", LAUNCH_MISSING + NGRAM + "load: {concurrency: [1], slo: ttft_ms=500}\n")]),
    Case("sweep-repeats-word", ["sweep", "s.yaml"], ["'repeats'", "whole number", "'three'"],
         [sweep_file("s.yaml", GOOD_SWEEP + "repeats: three\n")]),
    Case("sweep-k-zero-in-list", ["sweep", "s.yaml"], ["candidates.0.num_speculative_tokens", ">= 1", "got 0"],
         [sweep_file("s.yaml", LAUNCH_MISSING + "candidates:\n  - {method: ngram, num_speculative_tokens: [2, 0]}\n"
                     + LOAD)]),
    Case("sweep-unknown-method", ["sweep", "s.yaml"], ["method", "'ngrm'"],
         [sweep_file("s.yaml", LAUNCH_MISSING + "candidates:\n  - {method: ngrm, num_speculative_tokens: 2}\n"
                     + LOAD)]),
    Case("sweep-not-a-mapping", ["sweep", "s.yaml"], ["s.yaml", "mapping"], [sweep_file("s.yaml", "- 1\n- 2\n")]),
    Case("sweep-endpoint-no-scheme", ["sweep", "s.yaml"], ["localhost:8000", "http://localhost:8000"],
         [sweep_file("s.yaml", "engine: {endpoint: 'localhost:8000'}\nbaseline_endpoint: http://127.0.0.1:8\n"
                     + NGRAM + LOAD)]),
    Case("sweep-missing-model", ["sweep", "s.yaml"], [NO_MODEL, "does not exist"], [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-dry-run-missing-model", ["sweep", "s.yaml", "--dry-run"], [NO_MODEL, "does not exist"],
         [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-dry-run-beyond-context", ["sweep", "s.yaml", "--dry-run"], ["100000", "context of 2048"],
         [sweep_file("s.yaml", "workload: {dataset: random, num_prompts: 4, input_len: [100000]}\n"
                     f"engine: {{model: {DEMO_TARGET}, max_model_len: 2048}}\n" + NGRAM + LOAD)]),
    Case("sweep-random-input-range", ["sweep", "s.yaml", "--dry-run"], ["0:512", "--dataset-option input_len=N"],
         [sweep_file("s.yaml", "workload: {dataset: random, num_prompts: 4, input_len: '0:512'}\n"
                     f"engine: {{model: {DEMO_TARGET}}}\n" + NGRAM + LOAD)]),
    Case("sweep-file-and-flags", ["sweep", "s.yaml", "--model", NO_MODEL], ["either as a file", "not both"],
         [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-flags-no-spec", ["sweep", "--model", NO_MODEL], ["--spec"]),
    Case("sweep-flags-spec-not-json", ["sweep", "--model", NO_MODEL, "--spec", "{ngram"], ["--spec", "not valid JSON"]),
    Case("sweep-min-gain", ["sweep", "s.yaml", "--min-gain", "1.5"], ["--min-gain", "[0, 1)"],
         [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-indifference-below-min-gain", ["sweep", "s.yaml", "--indifference", "0.005"],
         ["--indifference 0.005", "below the minimum gain 0.01", "--indifference 0.01 or more"],
         [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-min-gain-above-file-indifference", ["sweep", "s.yaml", "--min-gain", "0.05"],
         ["--indifference 0.03", "below the minimum gain 0.05", "--indifference 0.05 or more"],
         [sweep_file("s.yaml", GOOD_SWEEP + "indifference: 0.03\n")]),
    Case("sweep-file-indifference-below-min-gain", ["sweep", "s.yaml"],
         ["s.yaml", "indifference 0.02", "min_gain 0.05", "0.05 or more"],
         [sweep_file("s.yaml", GOOD_SWEEP + "min_gain: 0.05\nindifference: 0.02\n")]),
    Case("sweep-slo-flag", ["sweep", "s.yaml", "--slo", "ttft_ms=-5"], ["--slo", "ttft_ms", "> 0"],
         [sweep_file("s.yaml", GOOD_SWEEP)]),
    Case("sweep-bad-option", ["sweep", "--bogus"], ["--bogus", "sweep --help"]),

    # ---------------------------------------------------------------- sweep: a trace's bad rows, per reader
    trace_case("trace-mooncake-length-word", "t.jsonl",
               MOONCAKE_ROW + '{"timestamp": 3000, "input_length": "abc", "output_length": 20}\n',
               ['t.jsonl line 2', 'field "input_length"', "'abc'", "whole number of tokens", "fix the row or drop it"]),
    trace_case("trace-mooncake-out-of-order", "t.jsonl",
               MOONCAKE_ROW.replace('"timestamp": 0', '"timestamp": 6000')
               + MOONCAKE_ROW.replace('"timestamp": 0', '"timestamp": 3000'),
               ['t.jsonl line 2', 'field "timestamp"', "earlier than line 1's 6000", "sort the file by it"]),
    trace_case("trace-mooncake-no-output-length", "t.jsonl",
               MOONCAKE_ROW + '{"timestamp": 3000, "input_length": 80}\n',
               ['t.jsonl line 2', 'field "output_length"', "is missing", "output length in tokens"]),
    trace_case("trace-mooncake-two-prompts", "t.jsonl",
               '{"timestamp": 0, "input_length": 80, "text_input": "hello", "output_length": 20}\n',
               ['t.jsonl line 1', 'field "input_length"', "conflicts with 'text_input'", "give exactly one of"]),
    trace_case("trace-mooncake-hashes-not-ids", "t.jsonl",
               MOONCAKE_ROW + '{"timestamp": 3000, "input_length": 80, "output_length": 20, "hash_ids": ["a"]}\n',
               ['t.jsonl line 2', 'field "hash_ids"', "not a list of whole numbers"]),
    trace_case("trace-mooncake-aiperf-key", "t.jsonl",
               MOONCAKE_ROW + '{"timestamp": 3000, "input_length": 80, "output_length": 20, "delay": 5}\n',
               ['t.jsonl line 2', 'field "delay"', "AIPerf key", "replay the file with AIPerf"]),
    trace_case("trace-mooncake-not-json", "t.jsonl", MOONCAKE_ROW + '{"timestamp": 3000,\n',
               ['t.jsonl line 2', "not valid JSON", "fix the row or drop it"]),
    trace_case("trace-bailian-chat-id-repeats", "b.jsonl", BAILIAN_ROW + BAILIAN_ROW.replace("0.5", "0.9"),
               ['b.jsonl line 2', 'field "chat_id"', "0 repeats line 1", "its own chat_id"]),
    trace_case("trace-bailian-parent-below", "b.jsonl",
               BAILIAN_ROW.replace('"chat_id": 0, "parent_chat_id": -1', '"chat_id": 1, "parent_chat_id": 0')
               .replace('"turn": 1', '"turn": 2') + BAILIAN_ROW.replace("0.5", "0.9"),
               ['b.jsonl line 2', 'field "chat_id"', "parent of line 1, above it", "in the order they arrived"]),
    trace_case("trace-bailian-turn-zero", "b.jsonl", BAILIAN_ROW.replace('"turn": 1', '"turn": 0'),
               ['b.jsonl line 1', 'field "turn"', "0 is not a turn number", "fix the row or drop it"]),
    trace_case("trace-bailian-negative-time", "b.jsonl", BAILIAN_ROW.replace('"timestamp": 0.5', '"timestamp": -2'),
               ['b.jsonl line 1', 'field "timestamp"', "negative, before the trace's start"]),
    trace_case("trace-bailian-no-parent", "b.jsonl", BAILIAN_ROW.replace('"parent_chat_id": -1, ', ''),
               ['b.jsonl line 1', 'field "parent_chat_id"', "is missing", "-1 for a new conversation"],
               fmt="bailian"),
    trace_case("trace-burstgpt-negative-tokens", "burst.csv",
               BURSTGPT_HEADER + "5,ChatGPT,472,18,490,Conversation log\n6,ChatGPT,210,-18,192,Conversation log\n",
               ['burst.csv line 3', 'field "Response tokens"', "'-18' is negative", "fix the row or drop it"]),
    trace_case("trace-burstgpt-short-record", "burst.csv", BURSTGPT_HEADER + "5,ChatGPT,472,18\n",
               ["burst.csv line 2", "has 4 fields where the header names 6", "fix the row or drop it"]),
    trace_case("trace-burstgpt-empty-time", "burst.csv", BURSTGPT_HEADER + ",ChatGPT,472,18,490,API log\n",
               ['burst.csv line 2', 'field "Timestamp"', "is empty"]),
    trace_case("trace-burstgpt-missing-column", "burst.csv", "Timestamp,Model,Request tokens\n5,ChatGPT,472\n",
               ["burst.csv line 1", "missing column(s) Response tokens", "a BurstGPT trace"], fmt="burstgpt"),
    trace_case("trace-azure-not-a-time", "az.csv", AZURE_HEADER + "yesterday noon,374,44\n",
               ['az.csv line 2', 'field "TIMESTAMP"', "'yesterday noon' is not a date and time",
                "2023-11-16 18:17:03.9799600"]),
    trace_case("trace-azure-mixed-zones", "az.csv",
               AZURE_HEADER + "2024-05-12 00:00:00+00:00,374,44\n2024-05-12 00:00:01,20,9\n",
               ['az.csv line 3', 'field "TIMESTAMP"', "has no UTC offset where line 2's has one",
                "one form"]),
    trace_case("trace-azure-tokens-word", "az.csv", AZURE_HEADER + "2023-11-16 18:17:03.9799600,many,44\n",
               ['az.csv line 2', 'field "ContextTokens"', "'many' is not a whole number of tokens"]),
    trace_case("trace-azure-missing-column", "az.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,374\n",
               ["az.csv line 1", "missing column(s) GeneratedTokens", "an Azure LLM inference trace"], fmt="azure"),
    trace_case("trace-unknown-extension", "t.txt", MOONCAKE_ROW,
               ["t.txt", "cannot tell the trace format from a .txt extension", "name the format"]),
    trace_case("trace-empty-file", "t.jsonl", "", ["t.jsonl", "the file is empty"]),
    Case("trace-file-missing", ["sweep", "s.yaml", "--dry-run"], ["nope.jsonl", "file not found"],
         [sweep_file("s.yaml", trace_sweep("nope.jsonl"))]),

    # ---------------------------------------------------------------- resume
    Case("resume-not-a-run", ["resume", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("resume-missing-dir", ["resume", "nowhere"], ["nowhere", "summary.json"]),
    Case("resume-truncated-summary", ["resume", "RUN"], ["summary.json", "cut short", "line", "restore"],
         [truncate(SUMMARY, 4000)]),

    # ---------------------------------------------------------------- recommend
    Case("recommend-max-num-seqs-zero", ["recommend", "RUN", "--max-num-seqs", "0"], ["--max-num-seqs", "at least 1"]),
    Case("recommend-objective", ["recommend", "RUN", "--objective", "speed"], ["--objective", "throughput"]),
    Case("recommend-min-gain", ["recommend", "RUN", "--min-gain", "-0.1"], ["--min-gain", "[0, 1)"]),
    Case("recommend-indifference", ["recommend", "RUN", "--indifference", "1.5"], ["--indifference", "[0, 1)"]),
    Case("recommend-indifference-below-min-gain", ["recommend", "RUN", "--min-gain", "0.05", "--indifference", "0.02"],
         ["--indifference 0.02", "below the minimum gain 0.05", "--indifference 0.05 or more"]),
    Case("recommend-indifference-below-the-runs-min-gain", ["recommend", "RUN", "--indifference", "0.005", "--again"],
         ["--indifference 0.005", "below the minimum gain 0.01", "--indifference 0.01 or more"]),
    Case("verify-indifference", ["verify", "RUN", "--indifference", "-0.1"], ["--indifference", "[0, 1)"]),
    Case("recommend-slo-bad", ["recommend", "RUN", "--objective", "goodput", "--slo", "tpot_ms=abc"],
         ["--slo", "tpot_ms", "number", "'abc'"]),
    Case("recommend-not-a-run", ["recommend", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("recommend-truncated-summary", ["recommend", "RUN"], ["summary.json", "cut short", "restore"],
         [truncate(SUMMARY, 3000)]),
    Case("recommend-summary-not-json", ["recommend", "RUN"], ["summary.json", "not valid JSON"],
         [write(SUMMARY, "hello\n")]),

    # ---------------------------------------------------------------- verify
    Case("verify-endpoint-no-scheme", ["verify", "RUN", "--endpoint", "localhost:8000"],
         ["--endpoint", "http://localhost:8000"]),
    Case("verify-endpoint-unreachable", ["verify", "RUN", "--endpoint", DEAD], ["127.0.0.1:9"]),
    Case("verify-edited-elsewhere", ["verify", "RUN", "--recommendation", "edited.json", "--verify-dir", "v"],
         ["edited.json", "ranges"], [copy_json(REC, "edited.json", drafter(_overlap))]),
    Case("verify-overlapping-ranges", ["verify", "RUN", "--recommendation", "edited.json"],
         ["edited.json", "drafters.0.ranges", "start at batch"], [copy_json(REC, "edited.json", drafter(_overlap))]),
    Case("verify-backwards-ranges", ["verify", "RUN", "--recommendation", "edited.json"],
         ["edited.json", "drafters.0.ranges", "in order"], [copy_json(REC, "edited.json", drafter(_backwards))]),
    Case("verify-gap-in-ranges", ["verify", "RUN", "--recommendation", "edited.json"],
         ["drafters.0.ranges", "without gaps"], [copy_json(REC, "edited.json", drafter(_gap))]),
    Case("verify-ranges-short-of-max", ["verify", "RUN", "--recommendation", "edited.json"],
         ["drafters.0.ranges", "max_num_seqs 64"], [copy_json(REC, "edited.json", drafter(_short))]),
    Case("verify-ranges-not-the-spec", ["verify", "RUN", "--recommendation", "edited.json"],
         ["drafters.0.spec", "num_speculative_tokens_per_batch_size", "edit both alike"],
         [copy_json(REC, "edited.json", drafter(_table_differs))]),
    Case("verify-negative-k", ["verify", "RUN", "--recommendation", "edited.json"],
         ["edited.json", "drafters.0.ranges.1.k", ">= 0", "-1"], [copy_json(REC, "edited.json", drafter(_negative_k))]),
    Case("verify-recommendation-missing", ["verify", "RUN", "--recommendation", "none.json"], ["none.json", "read"]),
    Case("verify-recommendation-not-json", ["verify", "RUN", "--recommendation", "edited.json"],
         ["edited.json", "not valid JSON"], [write("edited.json", "{")]),
    Case("verify-recommendation-unknown-objective", ["verify", "RUN", "--recommendation", "edited.json"],
         ["objective", "'speed'"], [copy_json(REC, "edited.json", _set("objective", "speed"))]),
    Case("verify-objective", ["verify", "RUN", "--objective", "latency"], ["--objective", "throughput"]),

    # ---------------------------------------------------------------- report
    Case("report-html-existing-dir", ["report", "RUN", "--html", "RUN/verify"], ["--html", "directory", "report.html"]),
    Case("report-csv-existing-file", ["report", "RUN", "--csv", "RUN/summary.json"], ["--csv", "a file", "directory"]),
    Case("report-plots-existing-file", ["report", "RUN", "--plots", "RUN/requests.jsonl"], ["--plots", "a file"]),
    Case("report-profiles-existing-file", ["report", "RUN", "--profiles", "RUN/summary.json"],
         ["--profiles", "a file", "directory"]),
    Case("report-not-a-run", ["report", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("report-truncated-summary", ["report", "RUN"], ["summary.json", "cut short", "line", "restore"],
         [truncate(SUMMARY, 5000)]),
    Case("report-summary-wrong-field", ["report", "RUN"], ["summary.json", "created_utc"],
         [edit_json(SUMMARY, lambda d: d.__setitem__("created_utc", 7))]),
    Case("report-other-schema", ["report", "RUN"], ["schema", "the specmeter that wrote it"],
         [edit_json(SUMMARY, lambda d: d.__setitem__("schema_version", 999))]),
    Case("report-recommendation-negative-k", ["report", "RUN"], ["recommendation.json", "drafters.0.ranges.1.k", "-1"],
         [edit_json(REC, drafter(_negative_k))]),
    Case("report-recommendation-overlap", ["report", "RUN"], ["recommendation.json", "drafters.0.ranges"],
         [edit_json(REC, drafter(_overlap))]),
    Case("report-recommendation-truncated", ["report", "RUN"], ["recommendation.json", "cut short"],
         [truncate(REC, 100)]),
    Case("report-verification-truncated", ["report", "RUN"], ["verify/summary.json", "cut short"],
         [truncate("RUN/verify/summary.json", 2000)]),
    Case("report-recompute-no-requests", ["report", "RUN", "--recompute"], ["requests.jsonl", "missing", "restore"],
         [delete(REQUESTS)]),
    Case("report-recompute-empty-requests", ["report", "RUN", "--recompute"], ["requests.jsonl", "empty"],
         [write(REQUESTS, "")]),
    Case("report-recompute-verify-requests-missing", ["report", "RUN", "--recompute"],
         ["verify/requests.jsonl", "missing"], [delete("RUN/verify/requests.jsonl")]),

    # ---------------------------------------------------------------- compare
    Case("compare-one-run", ["compare", "RUN"], ["two or more"]),
    Case("compare-with-itself", ["compare", "RUN", "RUN"], ["same run directory"]),
    Case("compare-not-a-run", ["compare", "RUN", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("compare-requests-missing", ["compare", "RUN", "RUN/verify"], ["requests.jsonl", "missing"],
         [delete(REQUESTS)]),
    Case("compare-plots-existing-file", ["compare", "RUN", "RUN/verify", "--plots", "RUN/summary.json"],
         ["--plots", "a file"]),

    # ---------------------------------------------------------------- check
    Case("check-against-itself", ["compare", "RUN", "RUN", "--check"], ["same run directory"]),
    Case("check-requests-missing", ["compare", "RUN", "RUN/verify", "--check"], ["RUN/requests.jsonl", "missing"],
         [delete(REQUESTS)]),
    Case("check-not-a-run", ["compare", "elsewhere", "RUN", "--check"], ["elsewhere", "summary.json"],
         [mkdir("elsewhere")]),
    Case("check-drop-form", ["compare", "RUN", "RUN/verify", "--check", "--max-al-drop", "lots"], ["lots"]),
    Case("check-drop-too-big", ["compare", "RUN", "RUN/verify", "--check", "--max-speedup-drop", "150%"], ["150%"]),

    # ---------------------------------------------------------------- calibrate
    Case("plan-pooled-not-a-run", ["plan", "RUN", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("plan-truncated-summary", ["plan", "RUN"], ["summary.json", "cut short"], [truncate(SUMMARY, 4000)]),

    # ---------------------------------------------------------------- plan
    Case("plan-acceptance-above-one", ["plan", "RUN", "--acceptance", "1.5"], ["--acceptance", "1.5"]),
    Case("plan-not-a-run", ["plan", "elsewhere"], ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("plan-calibration-missing", ["plan", "RUN", "--calibration", "none.json"], ["none.json", "cannot read"]),
    Case("plan-calibration-wrong", ["plan", "RUN", "--calibration", "RUN/recommendation.json"],
         ["recommendation.json", "not a calibration"]),
    Case("plan-calibration-not-json", ["plan", "RUN", "--calibration", "cal.json"],
         ["cal.json", "cut short or not valid JSON"],
         [write("cal.json", "{")]),
    Case("estimate-target-config-missing", ["estimate", "--hardware", "h100-sxm", "--target-config", "t.json"],
         ["t.json", "config.json"]),
    Case("estimate-hardware-unknown", ["estimate", "--hardware", "abacus", "--target-config", str(DEMO_TARGET),
                                       "--method", "ngram"], ["--hardware 'abacus'", "h100-sxm"]),
    Case("estimate-no-drafter", ["estimate", "--hardware", "h100-sxm", "--target-config", str(DEMO_TARGET)],
         ["--draft-config", "--method ngram"]),
    Case("estimate-tp-zero", ["estimate", "--hardware", "h100-sxm", "--target-config", str(DEMO_TARGET), "--method",
                              "ngram", "--tp", "0"], ["--tp", "1 or more"]),

    # ---------------------------------------------------------------- vocab
    Case("vocab-no-vocabulary", ["vocab", "RUN"], ["--draft-vocab", "--top N --corpus PATH"]),
    Case("vocab-not-a-run", ["vocab", "elsewhere", "--top", "64", "--corpus", "RUN/summary.json"],
         ["elsewhere", "summary.json"], [mkdir("elsewhere")]),
    Case("vocab-corpus-missing", ["vocab", "RUN", "--top", "64", "--corpus", "c.txt"], ["--corpus c.txt", "no such"]),
    Case("vocab-draft-vocab-missing", ["vocab", "RUN", "--draft-vocab", "none.json"], ["none.json"]),

    # ---------------------------------------------------------------- demo
    Case("demo-k-zero", ["demo", "-k", "0", "--out", "out"], ["--k 0", "positive", "1,2,4"]),
    Case("demo-num-prompts-zero", ["demo", "--num-prompts", "0", "--out", "out"], ["--num-prompts 0", "at least 1"]),
    Case("demo-max-tokens-zero", ["demo", "--max-tokens", "0", "--out", "out"], ["--max-tokens 0"]),
    Case("demo-instances-above", ["demo", "--instances", "5", "--out", "out"], ["instances", "<= 4"]),
    Case("demo-max-rounds-one", ["demo", "--max-rounds", "1", "--out", "out"], ["--max-rounds 1", "2 or more"]),
    Case("sweep-flag-over-file", ["sweep", "s.yaml", "--warmup", "-1", "--dry-run"], ["warmup", ">= 0"],
         [write("s.yaml", GOOD_SWEEP)]),
    Case("demo-concurrency-zero", ["demo", "--concurrency", "1,0", "--out", "out"], ["--concurrency 1,0"]),
    Case("demo-concurrency-word", ["demo", "--concurrency", "1,x", "--out", "out"], ["concurrency", "1,4,16"]),
    Case("demo-repeats-zero", ["demo", "--repeats", "0", "--out", "out"],
         ["--repeats", "greater than or equal to 1", "demo --help"]),
    Case("demo-min-gain", ["demo", "--min-gain", "2", "--out", "out"], ["--min-gain", "[0, 1)"]),
    Case("demo-indifference-below-min-gain", ["demo", "--indifference", "0.001", "--out", "out"],
         ["--indifference 0.001", "below the minimum gain 0.01"]),

    # ---------------------------------------------------------------- data prepare
    Case("data-prepare-unknown", ["data", "prepare", "squad", "--out", "prep"], ["squad", "speed-bench"]),
    Case("data-prepare-config", ["data", "prepare", "speed-bench", "--subset", "nonsense", "--out", "prep"],
         ["nonsense", "qualitative"]),
]
