"""From CLI/config choices to the conversations a run sends, plus a description for the summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec
from specmeter.config.trace import TraceSpec
from specmeter.config.workload import PhaseSpec
from specmeter.data.matched import vocab_from_model
from specmeter.data.model import Conversation
from specmeter.data.phases import phased
from specmeter.data.registry import load_workload
from specmeter.data.selection import bucket_by_input_length, select
from specmeter.data.shaping import load_tokenizer, request_token_counter, shaped_conversations
from specmeter.data.traces.content import target_codec, trace_conversations
from specmeter.data.traces.formats import read_trace
from specmeter.data.traces.timing import window
from specmeter.schemas.plan import WorkloadSelection


def target_token_counter(tokenizer: str | None) -> Callable[[str], int]:
    """Count tokens with the target's own tokenizer (a local path or a cached hub id)."""
    tok = load_tokenizer(tokenizer, "--input-len")
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def load_conversations(
    dataset: str,
    path: str | None,
    load: LoadSpec,
    categories: list[str] | None = None,
    options: dict[str, Any] | None = None,
    input_len: tuple[int, int] | None = None,
    tokenizer: str | None = None,
    shaped: int | None = None,
    trace: TraceSpec | None = None,
    phases: list[PhaseSpec] | None = None,
) -> tuple[list[Conversation], WorkloadSelection]:
    """Load, filter by category and input length, sample (stratified); fail before any server starts.
    `shaped`: build the prompts to exactly that many tokens instead (one length of an input-length axis).
    `trace`: replay a trace instead, one conversation a row of its window, the dataset filling rows without text.
    `phases`: each phase's conversations in turn (data/phases.py), instead of one sample of the whole."""
    _check_trace_points(load, trace)
    if phases is not None and (load.num_prompts is not None or load.duration_s is not None):
        raise InputError("workload.phases: each phase says how many conversations it sends, once each in order; "
                         "drop num_prompts and duration_s (set phases[].conversations)")
    if trace is not None:
        return _trace_workload(dataset, path, load, categories, options or {}, input_len, tokenizer, shaped, trace)
    if dataset == "random" and input_len is not None:  # its prompts are made at one length: no range to keep
        raise InputError(f"input length {input_len[0]}:{input_len[1]}: random prompts are generated at one length "
                         f"(128 tokens unless told), not filtered by a range; give --dataset-option input_len=N "
                         "(a sweep file: workload.options.input_len, or workload.input_len: [N] for an axis)")
    if shaped is not None:
        convs = shaped_conversations(dataset, path, options or {}, shaped, tokenizer)
    else:
        convs = _dataset(dataset, path, options or {}, tokenizer)
    if not convs:
        raise InputError(f"workload {dataset!r} ({path or 'built-in'}) has no rows; check the file")
    if input_len is not None:
        convs = bucket_by_input_length(convs, target_token_counter(tokenizer), [input_len])[input_len]
        if not convs:
            raise InputError(f"no {dataset} prompt has {input_len[0]} <= input tokens < {input_len[1]}; "
                             "widen --input-len")
    if phases is not None:
        chosen = phased(convs, phases, load.seed)
    else:
        chosen = select(convs, num_prompts=load.num_prompts, categories=categories or None, seed=load.seed)
    cats: dict[str, int] = {}
    for c in chosen:
        cats[c.category] = cats.get(c.category, 0) + 1
    info = WorkloadSelection(
        dataset=dataset, path=path, categories=categories or None, options=options or {}, input_len=input_len,
        tokenizer=tokenizer, shaped_len=shaped, num_prompts=load.num_prompts, seed=load.seed,
        conversation_ids=[c.id for c in chosen], requests=sum(len(c.turns) for c in chosen),
        multi_turn=sum(1 for c in chosen if c.multi_turn), category_counts=cats, phases=phases,
    )
    return chosen, info


def _dataset(dataset: str, path: str | None, options: dict[str, Any], tokenizer: str | None) -> list[Conversation]:
    """The dataset's conversations as its loader gives them."""
    if dataset == "sonnet" and "count_tokens" not in options:  # sonnet counts with the target's tokenizer
        counter = request_token_counter(tokenizer, bool(options.get("chat")))
        return load_workload(dataset, path, count_tokens=counter, **options)
    return load_workload(dataset, path, **options)


def _check_trace_points(load: LoadSpec, trace: TraceSpec | None) -> None:
    """A trace is replayed at trace points, and only a trace is: refused before anything is read."""
    kinds = {p.kind for p in load.points}
    if trace is None and "trace" in kinds:
        raise InputError("load.trace_scale: trace points replay a trace; give the file as workload.trace.path")
    if trace is not None and kinds != {"trace"}:
        raise InputError("workload.trace is replayed at trace points only: give load.trace_scale (e.g. [0.5, 1, 2]) "
                         "instead of concurrency or request_rate")


def _trace_workload(dataset: str, path: str | None, load: LoadSpec, categories: list[str] | None,
                    options: dict[str, Any], input_len: tuple[int, int] | None, tokenizer: str | None,
                    shaped: int | None, trace: TraceSpec) -> tuple[list[Conversation], WorkloadSelection]:
    """The trace's window, each row with its content (data/traces/content.py), in arrival order: nothing sampled,
    cycled or shaped, since the trace says what is sent and when."""
    if input_len is not None or shaped is not None or load.num_prompts is not None or load.duration_s is not None:
        raise InputError("workload.trace: a trace's window decides what is sent, its rows their lengths; drop "
                         "input_len, num_prompts and duration_s (cut the trace with start_s and duration_s)")
    if dataset == "random" and not trace.random_tokens:
        raise InputError("workload.trace: to fill a trace's rows with random tokens set workload.trace.random_tokens; "
                         "workload.dataset names real text to fill them with")
    rows = window(read_trace(trace.path, trace.format), trace.start_s, trace.duration_s)
    source = codec = vocab = None
    if trace.random_tokens:
        vocab = vocab_from_model(tokenizer)
    elif any(r.text_input is None and r.messages is None for r in rows.rows):
        source = select(_dataset(dataset, path, options, tokenizer), categories=categories or None)
        codec = target_codec(tokenizer)
    content = trace_conversations(rows, trace, source, codec, vocab, seed=load.seed)
    convs = content.conversations
    cats: dict[str, int] = {}
    for c in convs:
        cats[c.category] = cats.get(c.category, 0) + 1
    info = WorkloadSelection(
        dataset=dataset, path=path, categories=categories or None, options=options, tokenizer=tokenizer,
        seed=load.seed, conversation_ids=[c.id for c in convs], requests=sum(len(c.turns) for c in convs),
        multi_turn=sum(1 for c in convs if c.multi_turn), category_counts=cats, trace=trace, notes=content.warnings,
    )
    return convs, info


def load_lengths(dataset: str, path: str | None, load: LoadSpec, lengths: list[int], categories: list[str] | None,
                 options: dict[str, Any] | None, tokenizer: str | None) -> tuple[dict[int, list[Conversation]],
                                                                      WorkloadSelection]:
    """An input-length axis: each length's conversations, shaped to it, selected alike (the same sample, the same
    seed); the selection describes the first length and holds every length's in `lengths`."""
    by_length: dict[int, list[Conversation]] = {}
    selections = []
    for n in lengths:
        by_length[n], info = load_conversations(dataset, path, load, categories, options, tokenizer=tokenizer,
                                                shaped=n)
        selections.append(info)
    return by_length, selections[0].model_copy(update={"shaped_len": None, "lengths": selections})


def reload_conversations(info: WorkloadSelection, load: LoadSpec, where: str) -> list[Conversation]:
    """The same conversations a stored selection named, or an error saying the dataset changed."""
    convs, _ = load_conversations(info.dataset, info.path, load, categories=info.categories, options=info.options,
                                  input_len=info.input_len, tokenizer=info.tokenizer, shaped=info.shaped_len,
                                  trace=info.trace, phases=info.phases)
    if [c.id for c in convs] != info.conversation_ids:
        raise InputError(
            f"{where}: the workload {info.dataset} ({info.path or 'built-in'}) no longer gives the same "
            "conversations as when the run started; restore that dataset file or start a new run"
        )
    return convs


def reload_lengths(info: WorkloadSelection, load: LoadSpec, where: str) -> dict[int, list[Conversation]]:
    """Each length's conversations of a stored input-length axis (empty: the selection has no axis)."""
    return {sel.shaped_len: reload_conversations(sel, load, f"{where} (input length {sel.shaped_len})")
            for sel in info.lengths if sel.shaped_len is not None}
