"""The live-fault campaign (live_fault_cases.py): `specmeter run` attached to two fake vLLM servers that misbehave
as each case says (every command run in this process, through the CLI's own entry point: in_process.py). Each ends
with its exit code and one line holding its words, never a traceback; nothing it measured is lost (requests.jsonl
only grows: its bytes before a resume are the start of its bytes after, and no finished request disappears); no
secret reaches the disk; and where the run stopped, a resume against the fixed server completes it."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import pytest
from in_process import specmeter as _specmeter
from live_fault_cases import CASES, REFUSED, LiveCase

from fakeengine.server import FakeEngine
from specmeter.rundir.store import load_summary

pytestmark = pytest.mark.timeout(180)


def _said(res: subprocess.CompletedProcess[str]) -> str:
    return res.stdout[-3000:] + res.stderr[-3000:]


def _finished(run_dir: Path) -> set[tuple[str, str, int, str, int]]:
    """The finished requests on disk, by (configuration, point, repeat, conversation, turn)."""
    out = set()
    for line in (run_dir / "requests.jsonl").read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            r = json.loads(line)
            if r.get("ok") and not r.get("warmup"):
                out.add((r["config_id"], r["point_id"], r["repeat"], r["conversation_id"], r["turn"]))
    return out


def _no_secret(run_dir: Path, secret: str) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the API key reached {path.relative_to(run_dir)}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_live_fault_ends_as_the_case_says_and_loses_nothing(case: LiveCase, tmp_path: Path) -> None:
    with FakeEngine(**case.candidate) as cand, FakeEngine(speculative=False, **case.baseline) as base:
        res = _specmeter("run", "--endpoint", cand.url, "--baseline-endpoint", cand.url if case.same_url else base.url,
                         "--spec", case.spec, "--dataset", "sample", "--num-prompts", "3", "--max-tokens", "8",
                         "--concurrency", "1,2", "--warmup", "0", "--request-timeout", "2", "--out", str(tmp_path),
                         "--name", "RUN", *case.flags, cwd=tmp_path)
        said = _said(res)
        assert res.returncode == case.exit, said
        assert "Traceback" not in said
        last = [ln for ln in res.stderr.splitlines() if ln.strip()][-1:] if case.exit else []
        for word in case.words:
            assert last and word in last[0], (word, said)
        run_dir = tmp_path / "RUN"
        if case.exit == 2:  # refused before anything was sent
            assert not run_dir.exists() and not cand.completion_requests() and not base.completion_requests()
            return
        before, finished = (run_dir / "requests.jsonl").read_bytes(), _finished(run_dir)
        if case.exit == 4:  # stopped: the fixed servers let a resume complete it
            assert case.fixed is not None or case.fixed_baseline is not None, "a stopped case says its fix"
            for server, settings in ((cand, case.fixed), (base, case.fixed_baseline)):
                for key, value in (settings or {}).items():
                    setattr(server, key, value)
            resumed = _specmeter("resume", str(run_dir), cwd=tmp_path)
            if case.resume_refused is not None:  # refused in one line, and nothing on disk touched
                last_line = [ln for ln in resumed.stderr.splitlines() if ln.strip()][-1:]
                assert resumed.returncode == REFUSED and "Traceback" not in _said(resumed), _said(resumed)
                assert last_line and case.resume_refused in last_line[0], _said(resumed)
                assert (run_dir / "requests.jsonl").read_bytes() == before
                return
            assert resumed.returncode == 0 and "Traceback" not in _said(resumed), _said(resumed)
            assert (run_dir / "requests.jsonl").read_bytes().startswith(before), "resume rewrote what was on disk"
            assert _finished(run_dir) >= finished, "a finished request was lost"
        summary = load_summary(run_dir)
        assert summary.status == "complete", summary.incomplete_reason
        assert all(p.measured for c in summary.configs for p in c.points)
        for argv in case.then:
            after = _specmeter(*(str(run_dir) if a == "RUN" else a for a in argv), cwd=tmp_path)
            assert after.returncode == 0 and "Traceback" not in _said(after), (argv, _said(after))
        if case.refuses is not None:
            argv, words = case.refuses
            refused = _specmeter(*(str(run_dir) if a == "RUN" else a for a in argv), cwd=tmp_path)
            lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
            assert refused.returncode == REFUSED and "Traceback" not in _said(refused), (argv, _said(refused))
            assert len(lines) == 1 and words in lines[0], (argv, _said(refused))
        assert _finished(run_dir) >= finished
        if "--api-key" in case.flags:
            _no_secret(run_dir, case.flags[case.flags.index("--api-key") + 1])


def test_the_campaign_has_forty_live_cases_or_more() -> None:
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
