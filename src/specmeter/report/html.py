"""One self-contained HTML page per run: the answer first (where speculation pays, what to deploy), then the
plots, the tables, the warnings and where every number came from. Plots are inlined as SVG and the page loads
nothing, so it opens offline and can be mailed as one file. It draws the same Grids as the console."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from specmeter import __version__
from specmeter.report.grid import VERDICTS, Grid, Note
from specmeter.report.host import host_line
from specmeter.report.outputs import Output
from specmeter.report.ramp import stop_line
from specmeter.report.recommendation import deploy_lines, evidence_table, heading, round_lines
from specmeter.report.search import search_lines
from specmeter.report.tables import notes, summary_tables
from specmeter.rundir.run_data import RunData
from specmeter.rundir.store import atomic_write_text
from specmeter.schemas.recommend import Recommendation

REPORT = "report.html"

CSS = """
:root { --fg: #1d2330; --muted: #5b6577; --line: #d9dee7; --bg: #ffffff; --panel: #f6f8fb; --good: #1b7f3b;
        --bad: #b3261e; --warn: #8a5a00; --accent: #2f5bd3; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; }
header { padding: 20px 32px 12px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .id { color: var(--muted); font-size: 13px; }
nav { padding: 8px 32px; border-bottom: 1px solid var(--line); position: sticky; top: 0; background: var(--bg);
      z-index: 1; }
nav a { margin-right: 16px; color: var(--accent); text-decoration: none; font-size: 13px; }
main { padding: 8px 32px 40px; max-width: 1500px; }
section { margin-top: 24px; }
h2 { font-size: 18px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.answer { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; }
.answer li { margin: 3px 0; }
.pays { color: var(--good); font-weight: 600; }
.slows { color: var(--bad); font-weight: 600; }
.unclear, .disturbed, .withheld { color: var(--warn); font-weight: 600; }
pre.config { background: #0f1420; color: #e7ecf5; padding: 10px 12px; border-radius: 6px; white-space: pre-wrap;
             word-break: break-all; margin: 4px 0 10px; }
table { border-collapse: collapse; margin: 4px 0 14px; font-size: 13px; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.section td { border-top: 2px solid #98a2b3; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px; background: #fff; }
figure svg { width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12px; }
ul.notes li.warn { color: var(--warn); }
ul.notes li.info { color: var(--muted); }
dl.prov { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
dl.prov dt { color: var(--muted); }
dl.prov dd { margin: 0; word-break: break-all; }
.muted { color: var(--muted); }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def grid_html(grid: Grid) -> str:
    """A Grid as an HTML table: numbers right-aligned, sections ruled, newlines kept."""
    out = [f"<table><caption>{_e(grid.title)}</caption><thead><tr>"]
    out += [f"<th>{_e(c.name)}</th>" for c in grid.columns]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(grid.rows):
        out.append('<tr class="section">' if i in grid.sections and i > 0 else "<tr>")
        for col, cell in zip(grid.columns, row):
            cls = ' class="r"' if col.align == "right" else ""
            out.append(f"<td{cls}>{_e(cell).replace(chr(10), '<br>')}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _notes_html(items: list[Note]) -> str:
    if not items:
        return '<p class="muted">None.</p>'
    ordered = [n for n in items if n.warn] + [n for n in items if not n.warn]
    lis = "".join(f'<li class="{"warn" if n.warn else "info"}">{_e(n.text)}</li>' for n in ordered)
    return f'<ul class="notes">{lis}</ul>'


def _answer(run: RunData) -> str:
    """Where speculation pays, as analysis decided it, and the config to deploy, ready to copy."""
    s = run.summary
    labels = {p.id: p.label() for p in s.plan.points}
    items: list[str] = []
    synthetic = {c.id: c.label for c in s.plan.configs if c.spec.synthetic}
    for sp in s.analysis.speedups:
        v = sp.verdict or "unclear"
        value = sp.output_throughput if sp.decided_on == "output_throughput" else sp.tpot
        ratio = "-" if value.value is None else f"{value.value:.2f}x"
        if value.ci95_low is not None and value.ci95_high is not None:
            ratio += f" [{value.ci95_low:.2f}, {value.ci95_high:.2f}]"
        on = "throughput" if sp.decided_on == "output_throughput" else "TPOT"
        marker = (f' <span class="muted">(synthetic acceptance, {_e(synthetic[sp.config_id])}: a measurement, '
                  'not deployable)</span>' if sp.config_id in synthetic else "")
        items.append(f'<li>{_e(sp.config_id)} at {_e(labels.get(sp.point_id, sp.point_id))}: {on} {_e(ratio)} '
                     f'<span class="{_e(v)}">{_e(VERDICTS[v])}</span>{marker}</li>')
    items += [f"<li>{_e(c.note)}</li>" for c in s.analysis.crossovers]
    items += [f"<li>{_e(line)}</li>" for line in search_lines(s)]
    items += [f"<li>{_e(stop)}</li>" for r in s.ramp if (stop := stop_line(s, r)) is not None]
    rec = run.recommendation
    corrected = rec is not None and rec.round > 1
    after = " before verification corrected the table" if corrected else ""
    items += [f"<li>{'the sweep chose' if corrected else 'best'} at {_e(labels.get(c.point_id, c.point_id))}: "
              f"<b>{_e(c.best_config_id)}</b> (K={c.best_k}){after}</li>" for c in s.analysis.choices]
    parts = ['<div class="answer">']
    host = host_line(s)
    if host is not None:  # how quiet the machine was qualifies every number on the page: said first
        parts.append(f'<p class="{"disturbed" if host[1] else "muted"}">{_e(host[0])}</p>')
    # The final answer first: the table that held (or where the loop stopped), then what the sweep measured.
    if rec is not None and rec.best is not None:
        parts.append(f"<h3>What to deploy</h3><p class=\"muted\">{_e(heading(rec))}</p>")
        lines = deploy_lines(rec) + (round_lines(run.answer) if run.answer is not None else [])
        for line in lines:
            # A line that carries a flag shows its words, then the flag in a block to copy.
            label = line.text.replace(line.config, "").strip().rstrip(":") if line.config else line.text.strip()
            if label:
                weight = "b" if line.emphasis and not line.config else "span"
                parts.append(f'<div class="{"muted" if line.dim else ""}"><{weight}>{_e(label)}</{weight}></div>')
            if line.config is not None:
                parts.append(f'<pre class="config">{_e(line.config)}</pre>')
        parts.append("<h3>What the sweep measured</h3>")
    parts.append(f"<ul>{''.join(items)}</ul>" if items else
                 '<p class="muted">No speedup was computed (no baseline in this run).</p>')
    parts.append("</div>")
    return "".join(parts)


def _provenance(run: RunData) -> str:
    s = run.summary
    rows: list[tuple[str, str]] = [
        ("run", f"{run.run_id} ({s.plan.kind}, {s.status})"),
        ("command", " ".join(s.command) or "-"),
        ("created", s.created_utc),
        ("wall time", "-" if s.wall_s is None else f"{s.wall_s / 60:.1f} min"),
        ("specmeter", f"{s.specmeter_version} (this page: {__version__})"),
        ("engine", ", ".join(sorted({c.engine_version for c in s.configs if c.engine_version})) or "-"),
        ("machine", ", ".join(f"{k} {v}" for k, v in s.environment.items())),
        ("workload", json.dumps(s.plan.workload.model_dump(exclude={"conversation_ids"}, exclude_none=True))),
    ]
    for role, model in s.models.items():
        rows.append((f"model: {role}", _models_text(model)))
    for c in s.configs:
        if c.server_command:
            rows.append((f"server: {c.config_id}", " ".join(c.server_command)))
    body = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    return f'<dl class="prov">{body}</dl>'


def _models_text(model: Any) -> str:
    """A model entry of the summary: path and content hashes, or a map of them (the drafts)."""
    if isinstance(model, dict) and "path" in model:
        sha = model.get("sha256")
        hashes = ", ".join(f"{k} {v[:12]}" for k, v in sha.items()) if isinstance(sha, dict) else str(sha or "")
        return f"{model['path']} ({hashes})" if hashes else str(model["path"])
    if isinstance(model, dict):
        return "; ".join(f"{k}: {_models_text(v)}" for k, v in model.items())
    return str(model)


def _plots_html(run: RunData) -> str:
    from specmeter.report.plots import figures, svg_text

    out = []
    for name, fig in figures(run).items():
        out.append(f'<figure id="plot-{_e(name)}">{svg_text(fig)}<figcaption>{_e(name)}</figcaption></figure>')
    return f'<div class="plots">{"".join(out)}</div>' if out else '<p class="muted">Nothing to plot.</p>'


def _tables_html(run: RunData) -> str:
    return "".join(grid_html(g) for g in summary_tables(run.summary, run.calibration))


def _evidence(rec: Recommendation) -> str:
    """Each drafter's evidence; on an input-length axis, each length's under its own heading."""
    parts = rec.per_input_len or [rec]
    return "".join((f"<h3>{_e(part.input_len)} input tokens: {_e(heading(part))}</h3>" if part.input_len else "")
                   + "".join(grid_html(evidence_table(part, d)) for d in part.drafters) for part in parts)


def page(run: RunData) -> str:
    """The whole report as one HTML document."""
    s = run.summary
    v = run.verification
    rec = run.recommendation
    sections = [("answer", "Where speculation pays", _answer(run)),
                ("plots", "Plots", _plots_html(run))]
    if rec is not None and rec.best is not None:
        sections.append(("recommendation", "Recommendation: the evidence behind each range", _evidence(rec)))
    sections.append(("tables", "Measurements", _tables_html(run)))
    if v is not None:
        sections.append(("verification", "Verification: the recommended config, run",
                         _tables_html(v) + _notes_html(notes(v.summary))))
    sections.append(("warnings", "Warnings and notes", _notes_html(notes(s))))
    sections.append(("provenance", "Provenance", _provenance(run)))
    nav = "".join(f'<a href="#{key}">{_e(title.split(":")[0])}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{_e(title)}</h2>{content}</section>' for key, title, content in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>specmeter · {_e(run.run_id)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>specmeter: speculative decoding report</h1><div class=\"id\">{_e(run.identity())}</div>"
            f"</header><nav>{nav}</nav><main>{body}</main></body></html>\n")


class HtmlOutput(Output):
    """report.html (or the given file): the run on one page that works offline."""

    kind = "html"

    def write(self, run: RunData) -> list[Path]:
        target = self.dest or run.run_dir / REPORT
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, page(run))
        return [target]
