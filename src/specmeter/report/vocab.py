"""`specmeter vocab` as a person reads it: per category, how much of the target's output each draft vocabulary
covers and the AL it caps a perfect drafter at; per position, the ceilings; beside each drafted configuration,
its measured acceptance against them and the share of its rejections the vocabulary forces."""

from __future__ import annotations

from rich.console import Console

from specmeter.report.console import print_tables
from specmeter.report.grid import Grid, Note, grid
from specmeter.schemas.vocab import DraftedComparison, Estimate, MapAnalysis, VocabCoverage, VocabReport


def _pct(e: Estimate) -> str:
    if e.value is None:
        return "-"
    ci = f" [{e.low * 100:.1f}, {e.high * 100:.1f}]" if e.low is not None and e.high is not None else ""
    return f"{e.value * 100:.1f}%{ci}"


def _al(e: Estimate) -> str:
    if e.value is None:
        return "-"
    ci = f" [{e.low:.2f}, {e.high:.2f}]" if e.low is not None and e.high is not None else ""
    return f"{e.value:.2f}{ci}"


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _rows(m: MapAnalysis) -> list[VocabCoverage]:
    return [m.overall, *m.categories]


def _by_category(title: str, report: VocabReport, cell: str) -> Grid:
    """Rows: all, then each category; columns: one per map."""
    g = grid(title, ("category", "requests", "tokens", *(m.map.name for m in report.maps)),
             left={"category"})
    first = report.maps[0]
    for i, row in enumerate(_rows(first)):
        if i == 1:
            g.add_section()
        cells = [_pct(_rows(m)[i].coverage) if cell == "coverage" else _al(_rows(m)[i].al_ceiling)
                 for m in report.maps]
        g.add_row(row.category, str(row.requests), str(row.tokens), *cells)
    return g


def _positions(report: VocabReport) -> Grid:
    g = grid(f"Acceptance ceiling per drafted position at K = {report.k} (all categories): the share of steps in "
             "which a perfect drafter restricted to the vocabulary has position i accepted",
             ("map", "size", *(f"a{i}" for i in range(report.k)), "AL ceiling"), left={"map"})
    for m in report.maps:
        g.add_row(m.map.name, str(m.map.size), *(_pct(e) for e in m.overall.ceiling), _al(m.overall.al_ceiling))
    return g


def _drafted(report: VocabReport, config_id: str, run: str) -> list[Grid]:
    """One drafted configuration: per map and position, measured against ceiling; then per category."""
    comparisons = [(m, d) for m in report.maps for d in m.drafted if d.config_id == config_id and d.run == run]
    first: DraftedComparison = comparisons[0][1]
    name = f"{first.label} ({first.config_id}" + ("" if run == report.run else f", {run}") + ")"
    pos = grid(f"{name}: per position, measured a_i / the vocabulary's ceiling at K = {first.k} (explained: "
               "(1 - ceiling) / (1 - measured), the part of the rejections even a perfect drafter with the vocabulary "
               "has)",
               ("map", *(f"a{i}" for i in range(first.k)), "AL", "explained"), left={"map"})
    for m, d in comparisons:
        cells = [f"{_share(p.measured)} / {_share(p.ceiling)} ({_share(p.explained)})" for p in d.overall.positions]
        al = "-" if d.overall.al_measured is None else f"{d.overall.al_measured:.2f} / " + (
            "-" if d.overall.al_ceiling is None else f"{d.overall.al_ceiling:.2f}")
        pos.add_row(m.map.name, *cells, al, _share(d.overall.al_explained))
    if not first.categories:
        return [pos]
    cats = grid(f"{name} per category: measured AL, and per map the AL ceiling and the share of the lost "
                "acceptance (K + 1 - AL) the vocabulary forces",
                ("category", "AL", *(m.map.name for m, _ in comparisons)), left={"category"})
    for i, row in enumerate(first.categories):
        al = "-" if row.al_measured is None else f"{row.al_measured:.2f}"
        cells = []
        for _m, d in comparisons:
            c = d.categories[i]
            cells.append("-" if c.al_ceiling is None else f"{c.al_ceiling:.2f}, {_share(c.al_explained)}")
        cats.add_row(row.category, al, *cells)
    return [pos, cats]


def vocab_grids(report: VocabReport) -> list[Grid]:
    span = f"{report.requests} requests of {report.conversations} conversations, {report.tokens} tokens"
    grids = [
        _by_category(f"Coverage: share of the baseline's output tokens inside each draft vocabulary ({span})",
                     report, "coverage"),
        _by_category(f"AL ceiling: the most a perfect drafter with each vocabulary could reach at K = {report.k}",
                     report, "al"),
        _positions(report),
    ]
    seen: list[tuple[str, str]] = []
    for d in report.maps[0].drafted:
        if (d.config_id, d.run) not in seen:
            seen.append((d.config_id, d.run))
            grids += _drafted(report, d.config_id, d.run)
    return grids


def _grouped(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(map names joined, text) per distinct text, in first-seen order: --top maps share their corpus' notes."""
    names: dict[str, list[str]] = {}
    for name, text in pairs:
        names.setdefault(text, []).append(name)
    return [(", ".join(n), text) for text, n in names.items()]


def vocab_notes(report: VocabReport) -> list[Note]:
    sources = _grouped([(m.map.name, f"the most frequent tokens of {m.map.source}" if m.map.kind == "top"
                         else f"{m.map.kind} read from {m.map.source}") for m in report.maps])
    notes = [Note(f"{names}: {text}") for names, text in sources]
    notes += [Note(f"{names}: {text}", warn=True)
              for names, text in _grouped([(m.map.name, n) for m in report.maps for n in m.map.notes])]
    drafted = [(m.map.name, f"{d.label} ({d.config_id}): {n}") for m in report.maps for d in m.drafted for n in d.notes]
    notes += [Note(f"{names}: {text}", warn=True) for names, text in _grouped(drafted)]
    notes += [Note(n, warn=True) for n in report.notes]
    if report.deduplicated:
        notes.append(Note("temperature 0: each (conversation, turn) counted once; intervals resample conversations"))
    return notes


def render_vocab(console: Console, report: VocabReport) -> None:
    print_tables(vocab_grids(report), vocab_notes(report), console)
