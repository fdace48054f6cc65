"""The `specmeter vocab` command's flags: what a pruned draft vocabulary (EAGLE-3's d2t/t2d, or the top N tokens
of a corpus) costs on a run's own baseline outputs.

Beside cli/app.py, which registers it with the terminal it prints through (app.py stays under 400 lines), so this
module needs nothing from app.py. Thin like it: parse and call one workflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from specmeter.cli import parse as flags
from specmeter.workflows.terminal import Terminal


def _tops(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        values = flags.levels(text)
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise typer.BadParameter(f"--top {text!r}: draft vocabulary sizes, positive integers, e.g. --top 32000 or "
                                 "--top 64,128,256")
    return sorted(set(values))


def vocab_command(terminal: Callable[[bool], Terminal]) -> Callable[..., None]:
    """The command, printing through `terminal(json_out)`."""

    def vocab(
        run_dir: Annotated[Path, typer.Argument(help="A run directory with a speculation-off baseline whose records hold output token ids (vLLM at temperature 0).")],
        draft_vocab: Annotated[Path | None, typer.Option(help="The draft vocabulary: a safetensors file or draft model directory holding d2t or t2d (EAGLE-3), or a .npy / .json list of target token ids.")] = None,
        top: Annotated[str | None, typer.Option(help="Build the map from the N most frequent tokens of --corpus (several: 64,128,256).")] = None,
        corpus: Annotated[list[Path] | None, typer.Option(help="With --top: text, JSONL (text, prompt, turns, messages or token_ids per line) or a directory of them (repeatable). A run's requests.jsonl of the same workload makes the map in-sample (circular): the output says so.")] = None,
        tokenizer: Annotated[str | None, typer.Option(help="The target's tokenizer for a text corpus (default: the run's target model directory).")] = None,
        k: Annotated[int | None, typer.Option("--k", min=1, help="Drafted positions to give ceilings for (at least the largest K of the drafted configurations; without any, default 4).")] = None,
        drafted: Annotated[str | None, typer.Option(help="A drafted run to explain, RUN or RUN:CONFIG_ID (default: this run's own speculative configurations).")] = None,
        out: Annotated[Path | None, typer.Option(help="Where to write vocab.json (default: into RUN_DIR).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print vocab.json as one JSON document instead of tables.")] = False,
    ) -> None:
        """What a pruned draft vocabulary costs: from the baseline's own output token ids, the share of the target's
        tokens the draft vocabulary covers, overall and per category (with intervals), and the acceptance ceiling it
        implies per drafted position and in AL: what a perfect drafter restricted to it reaches, step by step at K
        (a step accepts the target's next tokens up to the first outside the vocabulary). Beside a drafted run: its
        measured rate per position against that ceiling, and the part of its rejections the vocabulary forces."""
        from specmeter.workflows import vocab as workflow

        workflow.vocab(workflow.VocabRequest(run_dir=run_dir, draft_vocab=draft_vocab, top=_tops(top),
                                             corpus=corpus or [], tokenizer=tokenizer, k=k, drafted=drafted, out=out),
                       terminal(json_out))

    return vocab
