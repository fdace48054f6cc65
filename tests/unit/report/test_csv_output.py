"""CSV and JSON outputs on the saved real run: the documented columns, one row per stored item, values that
read back as stored."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from specmeter.report.csv_output import (
    POINT_COLUMNS,
    RECOMMENDATION_COLUMNS,
    REQUEST_COLUMNS,
    SPEEDUP_COLUMNS,
    CsvOutput,
)
from specmeter.report.json_output import JsonOutput
from specmeter.report.outputs import output
from specmeter.rundir.run_data import RunData, load_run

RUN = Path(__file__).parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
DOCS = Path(__file__).parents[3] / "docs" / "csv.md"


@pytest.fixture(scope="module")
def run() -> RunData:
    return load_run(RUN)


def read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    return header, [dict(zip(header, r)) for r in rows[1:]]


def num(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def test_files_headers_and_row_counts(run: RunData, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "csv"
    written = output("csv", dest).write(run)
    names = {p.relative_to(dest).as_posix() for p in written}
    assert {"requests.csv", "points.csv", "speedups.csv", "recommendation.csv"} <= names
    assert {"verify/requests.csv", "verify/points.csv"} <= names
    assert all(p.exists() for p in written)

    for name, columns, expected in [
        ("requests.csv", REQUEST_COLUMNS, len(run.records)),
        ("points.csv", POINT_COLUMNS, sum(len(c.points) for c in run.summary.configs)),
        ("speedups.csv", SPEEDUP_COLUMNS, len(run.summary.analysis.speedups)),
        ("recommendation.csv", RECOMMENDATION_COLUMNS,
         sum(len(d.ranges) for d in run.recommendation.drafters) if run.recommendation else 0),
    ]:
        header, rows = read(dest / name)
        assert tuple(header) == columns, name
        assert len(rows) == expected, name
    assert run.verification is not None
    assert len(read(dest / "verify" / "requests.csv")[1]) == len(run.verification.records)


def test_request_values_round_trip(run: RunData, tmp_path: Path) -> None:
    CsvOutput(tmp_path).write(run)
    _, rows = read(tmp_path / "requests.csv")
    for rec, row in zip(run.records, rows):
        assert (row["config_id"], row["point_id"], row["conversation_id"]) == (rec.config_id, rec.point_id,
                                                                               rec.conversation_id)
        assert int(row["output_tokens"]) == rec.output_tokens
        assert num(row["ttft_s"]) == rec.ttft_s  # full precision, no formatting
        assert num(row["tpot_s"]) == rec.tpot_s  # the record's own TPOT, the one the metrics use
        assert row["ok"] == ("true" if rec.ok else "false")
        assert row["error_kind"] == (rec.error_kind or "")
        assert int(row["chunks"]) == len(rec.chunk_offsets_s)
        if rec.sd is None:
            assert row["sd_al"] == ""
        else:
            assert num(row["sd_al"]) == rec.sd.acceptance_length
            assert int(row["sd_accepted"]) == rec.sd.num_accepted_tokens
    baseline = next(r for r in rows if r["role"] == "baseline")
    assert baseline["spec"] == "off" and baseline["sd_al"] == ""


def test_point_and_speedup_values_round_trip(run: RunData, tmp_path: Path) -> None:
    CsvOutput(tmp_path).write(run)
    _, points = read(tmp_path / "points.csv")
    speedups = {(s.config_id, s.point_id): s for s in run.summary.analysis.speedups}
    for row in points:
        config = run.summary.config(row["config_id"])
        assert config is not None
        pr = config.point(row["point_id"], int(row["repeat"]))
        assert pr is not None
        assert num(row["output_tok_s"]) == pr.latency.output_tokens_per_s
        assert num(row["tpot_mean_s"]) == pr.latency.tpot_s.mean
        assert num(row["e2e_p99_s"]) == pr.latency.e2e_s.p99
        assert row["load_kind"] == "concurrency" and int(row["load_value"]) == int(row["point_id"][1:])
        s = speedups.get((row["config_id"], row["point_id"]))
        if s is None:
            assert row["speedup_tok_s"] == "" and row["speedup_verdict"] == ""
        else:
            assert num(row["speedup_tok_s"]) == s.output_throughput.value
            assert num(row["speedup_tok_s_ci95_low"]) == s.output_throughput.ci95_low
            assert row["speedup_verdict"] == s.verdict
        head = pr.sd.headline
        if head is not None:
            assert [float(x) for x in row["sd_per_position"].split(";")] == head.per_position_rate
            assert row["sd_source"] == pr.sd.reference

    _, rows = read(tmp_path / "speedups.csv")
    for row, s in zip(rows, run.summary.analysis.speedups):
        assert num(row["tpot_ratio"]) == s.tpot.value
        assert num(row["e2e_ci95_high"]) == s.e2e.ci95_high
        assert int(row["paired_requests"]) == s.paired_requests
        assert row["same_work"] == ("true" if s.same_work else "false")

    _, recs = read(tmp_path / "recommendation.csv")
    assert run.recommendation is not None
    best = run.recommendation.drafters[0]
    assert [(int(r["start"]), int(r["end"]), int(r["k"])) for r in recs[:len(best.ranges)]] == \
        [(r.start, r.end, r.k) for r in best.ranges]
    assert recs[0]["bases"].split(";") == list(best.ranges[0].bases)


def test_no_recommendation_no_file(run: RunData, tmp_path: Path) -> None:
    bare = RunData(run.run_dir, run.summary)
    written = CsvOutput(tmp_path).write(bare)
    assert not (tmp_path / "recommendation.csv").exists()
    assert len(written) == 3


def test_every_column_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z0-9_]+)`", text))
    for columns in (REQUEST_COLUMNS, POINT_COLUMNS, SPEEDUP_COLUMNS, RECOMMENDATION_COLUMNS):
        missing = [c for c in columns if c not in documented]
        assert not missing, f"docs/csv.md does not document {missing}"


def test_json_output_to_file_and_stdout(run: RunData, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "sub" / "summary.json"
    assert output("json", dest).write(run) == [dest]
    assert json.loads(dest.read_text()) == json.loads(run.summary.model_dump_json())
    assert JsonOutput().write(run) == []
    assert json.loads(capsys.readouterr().out)["plan"]["kind"] == "demo"


@pytest.mark.parametrize("text", ['=HYPERLINK("http://evil")', "@SUM(A1:A9)", "+cmd|' /C calc'!A0", "-2+3",
                                  "\tx", "\rx"])
def test_a_cell_a_spreadsheet_would_run_as_a_formula_is_written_as_text(run: RunData, tmp_path: Path,
                                                                         text: str) -> None:
    """A dataset's category (or any text the run carries) that starts like a formula is quoted; numbers, also
    negative ones, stay numbers."""
    hostile = RunData(run.run_dir, run.summary)
    hostile.__dict__["records"] = [r.model_copy(update={"category": text}) for r in run.records[:2]]  # its cache
    CsvOutput(tmp_path).write(hostile)
    _, rows = read(tmp_path / "requests.csv")
    assert [row["category"] for row in rows] == ["'" + text] * 2
    assert all(num(row["ttft_s"]) is not None for row in rows)  # numbers stay numbers
