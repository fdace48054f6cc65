"""A run's answer: its recommendation rounds, each written once, and the pointer to the latest.

Round n is a table decided for the run: round 1 by `recommend` from the sweep, a later one by a correction after
verification, by deciding again on other criteria (`recommend --again`), or from a table the user gave `verify`.
Each round has at most two states, each its own file that only its writer uses and nobody replaces:

  answer/r<n>-decided.json    the table as decided (verification "not run")
  answer/r<n>-verified.json   the same table after its verification: held, disagreed (a corrected round n + 1
                              follows) or kept

The run's answer is the latest state of the highest round. recommendation.json is its pointer: a copy of that
state, replaced atomically and only after the state it points at is on disk, so a reader of the old name sees
the answer; readers here read the rounds themselves. Round numbers come from the files in the directory, never
from a file's content.

Run directories written before rounds (0.1.0 and main before it) kept the latest table in recommendation.json and
each contradicted one as recommendation-r<n>.json; they are read as rounds (migrated on read, with a note). The
first round written into such a directory first copies that latest table into answer/ under its own number, so
replacing the pointer loses nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from pydantic import ValidationError

from specmeter.common.errors import InputError, stored_file_message, validation_message
from specmeter.rundir.store import atomic_write_text, write_once
from specmeter.schemas.recommend import Recommendation

ANSWER_DIR = "answer"
POINTER = "recommendation.json"
Stage = Literal["decided", "verified"]
_ROUND_FILE = re.compile(r"^r(\d+)-(decided|verified)\.json$")
_LEGACY_FILE = re.compile(r"^recommendation-r(\d+)\.json$")


@dataclass(frozen=True)
class Round:
    """One state of one round, as read from its file."""

    number: int
    stage: Stage
    path: Path
    recommendation: Recommendation

    @property
    def verification(self) -> str:
        return self.recommendation.verification


@dataclass(frozen=True)
class Answer:
    """Every round of a run, oldest first (a round's verified state after its decided one)."""

    states: tuple[Round, ...]
    migrated: bool = False  # read from the layout before rounds; nothing was rewritten

    @property
    def latest(self) -> Round:
        return self.states[-1]

    @property
    def recommendation(self) -> Recommendation:
        return self.latest.recommendation

    @property
    def rounds(self) -> list[Round]:
        """Each round's latest state, oldest first (the last is the answer)."""
        last: dict[int, Round] = {}
        for state in self.states:
            last[state.number] = state
        return [last[n] for n in sorted(last)]

    def at(self, number: int) -> Round:
        for state in reversed(self.states):
            if state.number == number:
                return state
        known = ", ".join(str(r.number) for r in self.rounds)
        raise InputError(f"--round {number}: this run has rounds {known}; choose one of them")

    def note(self) -> str | None:
        if self.migrated:
            return ("answer read from the layout before rounds (recommendation.json and recommendation-r<n>.json); "
                    "nothing was rewritten")
        return None


def read_answer(run_dir: Path) -> Answer | None:
    """The run's rounds, or None when nothing was recommended yet."""
    states: dict[tuple[int, Stage], Round] = {}
    answer_dir = run_dir / ANSWER_DIR
    if answer_dir.is_dir():
        for path in answer_dir.iterdir():
            m = _ROUND_FILE.match(path.name)
            if m:
                number, stage = int(m.group(1)), cast(Stage, m.group(2))
                states[(number, stage)] = Round(number, stage, path, _read(run_dir, path, number))
    migrated = False
    for number, path in _legacy_rounds(run_dir):
        if not any(n == number for n, _ in states):
            rec = _read(run_dir, path, number)
            states[(number, _stage_of(rec))] = Round(number, _stage_of(rec), path, rec)
            migrated = True
    if not states:
        return None
    order = sorted(states, key=lambda key: (key[0], key[1] == "verified"))
    return Answer(tuple(states[key] for key in order), migrated=migrated)


def next_round(run_dir: Path) -> int:
    """The number a new round of this run gets: one past every round its directory holds."""
    answer = read_answer(run_dir)
    return 1 if answer is None else answer.latest.number + 1


def write_round(run_dir: Path, rec: Recommendation, stage: Stage, number: int) -> Round:
    """Write one state of round `number` under its own name (refused if that file exists: nothing is replaced),
    then point recommendation.json at it. `rec.round` is set from `number`."""
    rec.round = number
    try:  # what is written must read back: a table whose ranges and config disagree is refused here, not later
        Recommendation.model_validate(rec.model_dump())
    except ValidationError as exc:
        raise InputError(validation_message(exc, f"round {number} of {run_dir}", Recommendation)) from exc
    _keep_legacy_latest(run_dir)
    path = run_dir / ANSWER_DIR / f"r{number}-{stage}.json"
    write_once(path, rec.model_dump_json(indent=2) + "\n")
    _point(run_dir, rec)
    return Round(number, stage, path, rec)


def _stage_of(rec: Recommendation) -> Stage:
    return "decided" if rec.verification == "not run" else "verified"


def _legacy_rounds(run_dir: Path) -> list[tuple[int, Path]]:
    """Rounds of the layout before answer/: recommendation-r<n>.json (contradicted tables, by their number) and
    recommendation.json, which held the latest (one past the last archived)."""
    found = []
    for path in run_dir.glob("recommendation-r*.json"):
        m = _LEGACY_FILE.match(path.name)
        if m:
            found.append((int(m.group(1)), path))
    found.sort()
    pointer = run_dir / POINTER
    if pointer.is_file() and not (run_dir / ANSWER_DIR).is_dir():
        found.append(((found[-1][0] + 1) if found else 1, pointer))
    return found


def _keep_legacy_latest(run_dir: Path) -> None:
    """Before the first round is written into a directory of the old layout, its latest table, which lives only
    in recommendation.json, is copied into answer/ under its number (the pointer is about to be replaced)."""
    if (run_dir / ANSWER_DIR).is_dir() or not (run_dir / POINTER).is_file():
        return
    number, path = _legacy_rounds(run_dir)[-1]
    rec = _read(run_dir, path, number)
    rec.round = number
    write_once(run_dir / ANSWER_DIR / f"r{number}-{_stage_of(rec)}.json", rec.model_dump_json(indent=2) + "\n")


def _read(run_dir: Path, path: Path, number: int) -> Recommendation:
    try:
        rec = Recommendation.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror})") from exc
    except ValueError as exc:
        fix = f"restore it, or move it away and `specmeter recommend {run_dir} --again` decides anew"
        raise InputError(stored_file_message(path, exc, "a recommendation", fix, Recommendation)) from exc
    rec.round = number  # from the directory: a file's own field may have been edited
    return rec


def _point(run_dir: Path, rec: Recommendation) -> None:
    atomic_write_text(run_dir / POINTER, rec.model_dump_json(indent=2) + "\n")
