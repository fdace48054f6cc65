"""A phase-shift workload: some of a dataset's categories, then others, sent one after another at every point.

A drafter's acceptance follows the text: high on code, low on open chat. An engine that adapts its speculation to
what it sees, and a table fixed in advance, meet such a change differently, and one point mixing both kinds of
text reports neither. So the phases are laid out in order, each conversation marked with its phase, and every
result is also read per phase. The switch is placed in the order of the requests, not at a clock time: every
configuration then sends the same requests in the same phases, which keeps the comparisons paired (a switch at a
time would give the faster configuration more of the first phase). At a request-rate point the order is the
arrival order, so the switch falls at the same scheduled second for every configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from specmeter.common.errors import InputError
from specmeter.config.workload import PhaseSpec
from specmeter.data.model import Conversation
from specmeter.data.selection import select


def phased(conversations: Sequence[Conversation], phases: Sequence[PhaseSpec], seed: int) -> list[Conversation]:
    """Each phase's conversations (drawn as `select` draws, per its categories and count), marked with its name,
    the phases in order."""
    out: list[Conversation] = []
    for phase in phases:
        try:
            chosen = select(conversations, num_prompts=phase.conversations, categories=phase.categories, seed=seed)
        except InputError as exc:
            raise InputError(f"workload.phases {phase.name!r}: {exc}") from None
        out += [c.model_copy(update={"phase": phase.name}) for c in chosen]
    return out


def phase_runs(conversations: Sequence[Conversation]) -> Iterator[list[Conversation]]:
    """The conversations split where the phase changes (one run without phases)."""
    run: list[Conversation] = []
    for conv in conversations:
        if run and conv.phase != run[-1].phase:
            yield run
            run = []
        run.append(conv)
    if run:
        yield run
