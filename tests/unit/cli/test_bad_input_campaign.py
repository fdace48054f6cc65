"""The bad-input campaign (bad_input_cases.py) against a copy of a real demo run: each case exits 2 with one line
on stderr that starts `error:` and holds the case's words, no traceback, and leaves every file byte-identical with
nothing new. Run in process through the CLI's real `main` error path, so the whole campaign stays fast."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from bad_input_cases import CASES, Case

from specmeter.cli import main
from specmeter.common.errors import InputError

DEMO_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` with its sha256, and every directory (as "dir"): what "nothing changed" compares."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(DEMO_RUN, tmp_path / "RUN")
    for edit in case.edits:
        edit(tmp_path)
    before = tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["specmeter", *case.argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    assert stop.value.code == InputError.exit_code, err
    assert not out.strip(), f"a refused command prints its one line and nothing else: {out[:500]}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for word in case.words:
        assert word in lines[0], (word, lines[0])
    assert tree(tmp_path) == before, "a refused command must leave every file as it was and write nothing"


def test_the_campaign_covers_every_command() -> None:
    commands = {c.command for c in CASES}
    assert commands >= {"run", "sweep", "resume", "recommend", "verify", "report", "compare", "plan", "estimate",
                        "vocab", "demo", "data"}
    assert len(CASES) >= 100
    assert len({c.id for c in CASES}) == len(CASES)
