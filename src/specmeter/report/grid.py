"""The shape every report table takes (title, columns, rows of display text) and the formatting they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specmeter.schemas.analysis import Ratio
from specmeter.schemas.results import RunSummary

Align = Literal["left", "right"]


@dataclass
class Column:
    name: str
    align: Align = "left"
    wrap: bool = True


@dataclass
class Grid:
    """One table: cells are display text (a newline is a line break inside the cell); `sections` holds the row
    indices where a new group of rows begins (drawn as a rule)."""

    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        assert len(cells) == len(self.columns), (self.title, cells)
        self.rows.append(list(cells))

    def add_section(self) -> None:
        self.sections.append(len(self.rows))

    @property
    def row_count(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Note:
    """A line under the tables; `warn` marks what can make a number wrong or incomplete. A note about one point
    names it apart as well (`config`, `point`: the text then reads "config @ point: ..."), so that the console can
    say once what holds at many points; `check`: the per-point check it reports, counted over its points."""

    text: str
    warn: bool = False
    config: str | None = None
    point: str | None = None
    check: str | None = None

    @property
    def body(self) -> str:
        """What the note says, without the point it says it of."""
        return self.text.removeprefix(f"{self.config} @ {self.point}: ")


def grid(title: str, names: tuple[str, ...] | list[str], left: set[str] | None = None, right: set[str] | None = None,
         no_wrap: set[str] | None = None) -> Grid:
    """A grid whose columns are right-aligned when named in `right`, or when not named in `left`."""
    def align(n: str) -> Align:
        if right is not None:
            return "right" if n in right else "left"
        return "left" if left is None or n in left else "right"
    return Grid(title, [Column(n, align(n), n not in (no_wrap or set())) for n in names])


VERDICTS = {"pays": "SD pays", "slows": "SD slows serving", "unclear": "no clear difference",
            "disturbed": "disturbed: no clean verdict", "withheld": "withheld: its server drafted another K"}


def fmt(value: float | None, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    return "-" if value is None else fmt.format(value * scale)


def ms(value: float | None) -> str:
    return fmt(value, "{:.1f}", 1000.0)


def point_label(summary: RunSummary, point_id: str) -> str:
    found = summary.plan.load.point(point_id)
    return found.label() if found is not None else point_id


def ratio_text(r: Ratio) -> str:
    if r.value is None:
        return "-"
    text = f"{r.value:.2f}x"
    if r.ci95_low is not None and r.ci95_high is not None:
        text += f" [{r.ci95_low:.2f}, {r.ci95_high:.2f}]"
    if r.rerun_low is not None and r.rerun_high is not None:  # where the next run lands: the rounds' spread
        text += f" rerun {r.rerun_low:.2f}-{r.rerun_high:.2f}"
    elif r.median is not None and r.mad is not None:
        text += f" med {r.median:.2f} ±{r.mad:.2f}"
    return text
