"""`specmeter vocab RUN_DIR`: what a pruned draft vocabulary costs on the target's own outputs.

Reads the baseline's output token ids (the target alone), takes a draft vocabulary (a map file, or the top N
tokens of a corpus), and reports coverage and the per-position acceptance ceiling per category, and beside each
drafted configuration (this run's, or --drafted RUN[:CONFIG]) the share of its rejections the vocabulary forces.
Writes vocab.json into the run directory (or --out)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from specmeter.analysis.vocab import Stream, coverage_by_category, workload_conversation
from specmeter.analysis.vocab_drafted import compare, drafted_configs
from specmeter.common.errors import InputError
from specmeter.data.corpus import Encode, load_encoder, read_corpus
from specmeter.data.vocab_map import DraftVocab, read_vocab_map, top_n
from specmeter.report.vocab import render_vocab
from specmeter.rundir.run_data import RunData
from specmeter.rundir.store import keep, load_summary, write_once
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.vocab import MapAnalysis, VocabMapInfo, VocabReport
from specmeter.workflows.terminal import Terminal

VOCAB = "vocab.json"
DEFAULT_K = 4
NO_IDS = ("its records hold no output token ids; specmeter asks vLLM for them at temperature 0 (return_token_ids), "
          "other engines do not return them: run the baseline on vLLM at temperature 0")


@dataclass(frozen=True)
class VocabRequest:
    run_dir: Path
    draft_vocab: Path | None = None
    top: Sequence[int] = ()
    corpus: Sequence[Path] = ()
    tokenizer: str | None = None
    k: int | None = None
    drafted: str | None = None  # RUN or RUN:CONFIG_ID; None: the run's own drafted configurations
    out: Path | None = None


@dataclass
class _Baseline:
    streams: list[Stream]
    deduplicated: bool
    notes: list[str] = field(default_factory=list)


class _LazyEncoder:
    """The tokenizer, loaded only when a corpus holds text (a token-id corpus needs none)."""

    def __init__(self, tokenizer: str) -> None:
        self.tokenizer = tokenizer
        self._encode: Encode | None = None

    def __call__(self, text: str) -> list[int]:
        if self._encode is None:
            self._encode = load_encoder(self.tokenizer)
        return self._encode(text)


def vocab(request: VocabRequest, terminal: Terminal) -> VocabReport:
    if request.draft_vocab is None and not request.top:
        raise InputError("vocab: give the draft vocabulary: --draft-vocab MAP (d2t/t2d safetensors, .npy or .json "
                         "ids) or --top N --corpus PATH")
    if bool(request.top) != bool(request.corpus):
        raise InputError("--top N builds the map from the N most frequent tokens of a corpus: give both --top and "
                         "--corpus PATH (text, JSONL or a directory, tokenized with the target's tokenizer)")
    run = RunData(request.run_dir, load_summary(request.run_dir))
    baseline = run.summary.plan.main_baseline
    if baseline is None:
        raise InputError(f"{request.run_dir}: no speculation-off baseline; vocab reads the target's own outputs: "
                         "run with the baseline on")
    base = _baseline_streams(run, baseline)
    target = _target_dir(run, baseline)
    vocab_size = _vocab_size(target)
    top_id = max(int(s.ids.max()) for s in base.streams if s.ids.size)
    if vocab_size is not None and top_id >= vocab_size:
        raise InputError(f"{request.run_dir}: the baseline emitted token id {top_id}, beyond the target's vocabulary "
                         f"of {vocab_size} in {target}/config.json; the run's target is not that model")
    maps = _maps(request, target, vocab_size, base)
    drafted = _drafted(request, run)
    # Every drafted configuration gets a ceiling at each of its positions, whatever --k asked for.
    k = max([request.k or 0, *(c.k for _, c in drafted)]) or DEFAULT_K
    size = vocab_size or max(top_id, *(int(m.ids[-1]) for m in maps)) + 1
    notes = list(base.notes)
    notes += _drafted_notes(run, drafted, base)
    analyses = []
    ks = sorted({k, *(c.k for _, c in drafted)})
    for m in maps:
        mask = m.mask(size)
        # The ceiling depends on K (where steps start), so each drafted configuration is judged at its own.
        at = {kk: coverage_by_category(base.streams, mask, kk) for kk in ks}
        overall, categories = at[k]
        analyses.append(MapAnalysis(
            map=_info(m), overall=overall, categories=categories,
            drafted=[compare(str(d.run_dir), d.summary, d.records, c, *at[c.k]) for d, c in drafted],
        ))
    report = VocabReport(
        run=str(request.run_dir), baseline_id=baseline.id, target_vocab_size=vocab_size, k=k,
        conversations=len({s.conversation for s in base.streams}), requests=len(base.streams),
        tokens=sum(int(s.ids.size) for s in base.streams), deduplicated=base.deduplicated, maps=analyses,
        notes=notes,
    )
    text = report.model_dump_json(indent=2) + "\n"
    if request.out is not None:
        write_once(request.out, text)
        path = request.out
    else:
        path = keep(request.run_dir / VOCAB, text)
    if terminal.json_out:
        terminal.emit(report.model_dump_json(indent=2))
    else:
        render_vocab(terminal.out, report)
    terminal.human.print(f"vocab: {path}")
    return report


def _baseline_streams(run: RunData, baseline: PlannedConfig) -> _Baseline:
    """The baseline's measured outputs as token-id streams: at temperature 0 each (conversation, turn) once (every
    point, repeat and pass over the workload sent the same request)."""
    greedy = run.summary.plan.load_for(baseline).temperature == 0
    done = [r for r in run.records if r.config_id == baseline.id and r.ok and not r.warmup]
    if not done:
        raise InputError(f"{run.run_dir}: the baseline ({baseline.id}) completed no measured request; nothing to read")
    with_ids = [r for r in done if r.output_token_ids is not None]
    if not with_ids:
        raise InputError(f"{run.run_dir}: the baseline ({baseline.id}) {NO_IDS}")
    notes = [] if len(with_ids) == len(done) else [
        f"{len(done) - len(with_ids)} of {len(done)} baseline requests returned no token ids and are left out"]
    seen: set[tuple[str, int]] = set()
    streams = []
    for r in with_ids:
        conversation = workload_conversation(r.conversation_id)
        if greedy and (conversation, r.turn) in seen:
            continue
        seen.add((conversation, r.turn))
        streams.append(Stream(conversation, r.category, np.asarray(r.output_token_ids, dtype=np.int64)))
    if not any(s.ids.size for s in streams):
        raise InputError(f"{run.run_dir}: the baseline's requests returned empty outputs; nothing to read")
    return _Baseline(streams, greedy, notes)


def _target_dir(run: RunData, baseline: PlannedConfig) -> Path | None:
    """The target model's local directory (for its tokenizer and vocabulary size), if the run names one."""
    target = run.summary.models.get("target")
    for name in ((target.get("path") if isinstance(target, dict) else None), baseline.engine.model):
        if isinstance(name, str) and Path(name).is_dir():
            return Path(name)
    return None


def _vocab_size(target: Path | None) -> int | None:
    if target is None or not (target / "config.json").is_file():
        return None
    try:
        config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    size = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    return size if isinstance(size, int) and size > 0 else None


def _maps(request: VocabRequest, target: Path | None, vocab_size: int | None, base: _Baseline) -> list[DraftVocab]:
    maps = [] if request.draft_vocab is None else [read_vocab_map(request.draft_vocab, vocab_size)]
    if not request.top:
        return maps
    tokenizer = request.tokenizer or (str(target) if target is not None else None)
    counts = read_corpus(request.corpus, _LazyEncoder(tokenizer) if tokenizer else None)
    if vocab_size is not None and counts.counts.size > vocab_size:
        raise InputError(f"--corpus: token id {counts.counts.size - 1} is beyond the target's vocabulary of "
                         f"{vocab_size}; tokenize the corpus with the target's tokenizer (--tokenizer)")
    measured = {s.conversation for s in base.streams}
    overlap = {workload_conversation(c) for c in counts.conversation_ids} & measured
    source = counts.describe()
    notes = []
    if overlap:
        notes.append(f"in-sample: the corpus holds request records of {len(overlap)} of the {len(measured)} "
                     "conversations measured here; at temperature 0 those are the very outputs measured, so the map "
                     "is fitted to the text it is judged on and its coverage is optimistic: build it from other text")
    if counts.skipped:
        notes.append(f"{len(counts.skipped)} corpus files are not UTF-8 text and were skipped")
    built = [top_n(counts.counts, n, source) for n in request.top]
    return maps + [replace(m, notes=m.notes + tuple(notes), corpus_tokens=counts.tokens, in_sample=bool(overlap))
                   for m in built]


def _info(m: DraftVocab) -> VocabMapInfo:
    return VocabMapInfo(name=m.name, kind=m.kind, size=m.size, source=m.source, corpus_tokens=m.corpus_tokens,
                        in_sample=m.in_sample, notes=list(m.notes))


def _drafted(request: VocabRequest, run: RunData) -> list[tuple[RunData, PlannedConfig]]:
    """The drafted configurations to compare: --drafted RUN[:CONFIG], else the run's own."""
    if request.drafted is None:
        return [(run, c) for c in drafted_configs(run.summary)]
    path, _sep, config_id = request.drafted.partition(":")
    other = Path(path)
    if not other.is_dir():
        raise InputError(f"--drafted {request.drafted}: {path} is not a run directory; give RUN or RUN:CONFIG_ID")
    other_run = run if other.resolve() == run.run_dir.resolve() else RunData(other, load_summary(other))
    configs = drafted_configs(other_run.summary)
    if config_id:
        configs = [c for c in configs if c.id == config_id]
        if not configs:
            names = ", ".join(c.id for c in drafted_configs(other_run.summary)) or "none"
            raise InputError(f"--drafted {request.drafted}: no drafted configuration {config_id!r} in {path}; "
                             f"choose from {names}")
    if not configs:
        raise InputError(f"--drafted {request.drafted}: {path} has no drafted configuration (speculation on, "
                         "acceptance measured)")
    return [(other_run, c) for c in configs]


def _drafted_notes(run: RunData, drafted: Sequence[tuple[RunData, PlannedConfig]], base: _Baseline) -> list[str]:
    notes = []
    measured = {s.conversation for s in base.streams}
    for other in {id(d): d for d, _ in drafted}.values():
        if other is run:
            continue
        if run.target_hash and other.target_hash and run.target_hash != other.target_hash:
            notes.append(f"{other.run_dir} ran another target ({other.target_hash[:10]} against "
                         f"{run.target_hash[:10]}): its acceptance is not bounded by these outputs")
        theirs = {workload_conversation(r.conversation_id) for r in other.records if not r.warmup}
        if not theirs & measured:
            notes.append(f"{other.run_dir} shares no conversation with this run's baseline: its acceptance and these "
                         "ceilings are of different text")
    return notes
