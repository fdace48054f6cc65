"""`specmeter vocab` on a stored demo run: maps from a file and from a corpus, the drafted configurations beside
them, vocab.json, the in-sample warning, and one-line errors for what cannot be measured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from safetensors.numpy import save_file

from specmeter.analysis.vocab_drafted import share
from specmeter.common.errors import InputError
from specmeter.data.vocab_map import top_n
from specmeter.schemas.progress import Reporter
from specmeter.schemas.sd import SDCounts
from specmeter.schemas.vocab import Estimate, VocabCoverage, VocabReport
from specmeter.workflows.terminal import Terminal
from specmeter.workflows.vocab import VOCAB, VocabRequest, vocab

STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    return Path(shutil.copytree(STORED, tmp_path / "demo"))


def terminal(json_out: bool = False) -> tuple[Terminal, StringIO]:
    out = StringIO()
    return Terminal(out=Console(file=out, width=250), err=Console(file=StringIO()), json_out=json_out,
                    progress=lambda _console: nullcontext(Reporter())), out


def baseline_ids(run: Path) -> list[list[int]]:
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    return [r["output_token_ids"] for r in rows if r["config_id"] == "baseline"]


def token_corpus(path: Path, seed: int = 1) -> Path:
    """Another text's token ids: random ids over the low end of the vocabulary (not the run's outputs)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 512, 5000).tolist()
    path.write_text(json.dumps({"token_ids": ids}) + "\n", encoding="utf-8")
    return path


def test_a_full_map_and_corpus_maps_beside_both_drafted_configurations(stored: Path, tmp_path: Path) -> None:
    every = max(max(ids) for ids in baseline_ids(stored)) + 1
    np.save(tmp_path / "all.npy", np.arange(every))
    term, out = terminal(json_out=True)
    report = vocab(VocabRequest(run_dir=stored, draft_vocab=tmp_path / "all.npy", top=[4, 64],
                                corpus=[token_corpus(tmp_path / "c.jsonl")]), term)
    assert VocabReport.model_validate_json(out.getvalue()) == report
    assert VocabReport.model_validate_json((stored / VOCAB).read_text()) == report
    assert [m.map.name for m in report.maps] == ["ids", "top 4", "top 64"]
    assert report.k == 4  # the largest drafted K
    assert {c.category for c in report.maps[0].categories} == {"coding", "humanities", "math"}
    assert report.deduplicated and report.requests == report.conversations == 3
    full = report.maps[0]
    assert full.overall.coverage.value == 1.0 and full.overall.al_ceiling.value == pytest.approx(report.k + 1)
    assert {d.config_id for d in full.drafted} == {"draft_model-k2", "draft_model-k4"}
    for d in full.drafted:
        # Nothing is outside the vocabulary, so it explains none of the rejections.
        assert all(p.explained == 0.0 for p in d.overall.positions if p.measured is not None and p.measured < 1)
        assert len(d.overall.positions) == d.k and d.source == "per_request"
        assert {c.category for c in d.categories} <= {"coding", "humanities", "math"}
    small, large = report.maps[1], report.maps[2]
    assert small.map.size == 4 and small.map.kind == "top" and small.map.corpus_tokens == 5000
    assert not small.map.in_sample
    for a, b in zip([small.overall.coverage, *small.overall.ceiling], [large.overall.coverage, *large.overall.ceiling]):
        assert a.value is not None and b.value is not None and a.value <= b.value


def test_an_eagle3_head_with_the_corpus_top_n_as_its_d2t_measures_the_same_as_top_n(stored: Path,
                                                                                   tmp_path: Path) -> None:
    corpus = token_corpus(tmp_path / "c.jsonl")
    ids = json.loads(corpus.read_text())["token_ids"]
    chosen = top_n(np.bincount(ids), 48, "c").ids
    head = tmp_path / "eagle3-head"
    head.mkdir()
    save_file({"fc.weight": np.zeros((2, 2), dtype=np.float32), "d2t": chosen - np.arange(chosen.size)},
              str(head / "model.safetensors"))
    report = vocab(VocabRequest(run_dir=stored, draft_vocab=head, top=[48], corpus=[corpus]), terminal()[0])
    from_head, from_corpus = report.maps
    assert from_head.map.kind == "d2t" and from_head.map.size == 48
    assert from_head.overall == from_corpus.overall and from_head.categories == from_corpus.categories
    assert [d.overall for d in from_head.drafted] == [d.overall for d in from_corpus.drafted]


def test_tables_on_the_console(stored: Path, tmp_path: Path) -> None:
    term, out = terminal()
    report = vocab(VocabRequest(run_dir=stored, top=[16], corpus=[token_corpus(tmp_path / "c.jsonl")], k=2,
                                out=tmp_path / "v.json"), term)
    assert report.k == 4  # --k 2, but a drafted configuration ran K = 4: each of its positions gets a ceiling
    text = out.getvalue()
    for title in ("Coverage", "AL ceiling", "Acceptance ceiling per drafted position", "draft_model-k4", "top 16"):
        assert title in text
    assert (tmp_path / "v.json").exists() and not (stored / VOCAB).exists()


def test_a_map_built_from_the_runs_own_outputs_is_called_in_sample(stored: Path) -> None:
    term, out = terminal()
    report = vocab(VocabRequest(run_dir=stored, top=[32], corpus=[stored / "requests.jsonl"]), term)
    assert report.maps[0].map.in_sample
    assert "in-sample" in out.getvalue()


def test_explained_share_per_position_and_pooled() -> None:
    counts = SDCounts(source="per_request", num_steps=10, num_draft_tokens=20, num_accepted_tokens=9,
                      accepted_per_pos=[6, 3], drafted_per_pos=[10, 10])
    cover = VocabCoverage(category="all", conversations=2, requests=2, tokens=100, coverage=Estimate(value=0.95),
                          ceiling=[Estimate(value=0.9), Estimate(value=0.8)], al_ceiling=Estimate(value=2.7))
    got = share("all", counts, cover, 2)
    assert [p.explained for p in got.positions] == pytest.approx([0.1 / 0.4, 0.2 / 0.7])
    # Pooled: the rejections of both positions together, (0.1 + 0.2) / (0.4 + 0.7).
    assert got.al_explained == pytest.approx(0.3 / 1.1)
    assert got.al_ceiling == pytest.approx(2.7) and got.al_measured == pytest.approx(1.9)


def test_what_cannot_be_measured_is_one_line_naming_the_fix(stored: Path, tmp_path: Path) -> None:
    corpus = token_corpus(tmp_path / "c.jsonl")
    cases = [
        (VocabRequest(run_dir=stored), "--draft-vocab MAP"),
        (VocabRequest(run_dir=stored, top=[8]), "--corpus"),
        (VocabRequest(run_dir=stored, top=[8], corpus=[corpus], drafted=f"{stored}:nope"), "choose from"),
        (VocabRequest(run_dir=stored, top=[8], corpus=[corpus], drafted=str(tmp_path / "none")), "not a run"),
    ]
    for request, message in cases:
        with pytest.raises(InputError) as err:
            vocab(request, terminal()[0])
        assert message in str(err.value) and "\n" not in str(err.value)
    rows = [json.loads(line) for line in (stored / "requests.jsonl").read_text().splitlines()]
    for r in rows:
        r["output_token_ids"] = None
    (stored / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"no output token ids.*temperature 0"):
        vocab(VocabRequest(run_dir=stored, top=[8], corpus=[corpus]), terminal()[0])


def test_the_command_line(stored: Path, tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    corpus = token_corpus(tmp_path / "c.jsonl")
    done = subprocess.run([sys.executable, "-m", "specmeter.cli", "vocab", str(stored), "--top", "8,32", "--corpus",
                           str(corpus), "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [m.map.name for m in VocabReport.model_validate_json(done.stdout).maps] == ["top 8", "top 32"]
    bad = subprocess.run([sys.executable, "-m", "specmeter.cli", "vocab", str(stored), "--top", "0"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode != 0 and "--top" in bad.stderr
