"""Attached servers are checked to be what the plan says before anything is measured: the baseline is another
server than the candidate, serves the same model, and does not speculate; each mismatch is one line and no run
directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.server import FakeEngine

pytestmark = pytest.mark.timeout(60)
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4}'


def _run(sd: str, base: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmeter.cli", "run", "--endpoint", sd, "--baseline-endpoint", base,
                           "--spec", NGRAM, "--dataset", "sample", "--num-prompts", "2", "--max-tokens", "8",
                           "--concurrency", "1", "--warmup", "0", "--out", str(out), "--name", "r"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("case", "said"), [("same server", "are the same server"),
                                            ("another model", "serves"),
                                            ("a drafting baseline", "runs speculative decoding")])
def test_a_baseline_that_is_not_the_candidates_twin_is_refused_before_measuring(tmp_path: Path, case: str,
                                                                                said: str) -> None:
    with FakeEngine() as sd, FakeEngine(speculative=case == "a drafting baseline",
                                        model="fake/other" if case == "another model" else "fake/target-model") as base:
        res = _run(sd.url, sd.url if case == "same server" else base.url, tmp_path)
        sent = len(sd.completion_requests()) + len(base.completion_requests())
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-1000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in res.stderr
    assert sent == 0 and not (tmp_path / "r").exists()  # refused before anything was measured


def test_the_candidates_speculation_off_twin_passes(tmp_path: Path) -> None:
    with FakeEngine() as sd, FakeEngine(speculative=False) as base:
        res = _run(sd.url, base.url, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
