"""Config files a launched server reads (TensorRT-LLM's extra_llm_api_options YAML, SGLang's adaptive-speculation
JSON): one file per distinct content, named by its hash, so equal configs share a file, concurrent launches never
clash and a relaunch finds the same path in the same command."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def config_dir(env: str, engine: str) -> Path:
    """Where an engine's config files go: the directory `env` names, else one under the system's temporary
    directory."""
    return Path(os.environ.get(env) or Path(tempfile.gettempdir()) / f"specmeter-{engine}")


def content_file(text: str, directory: Path, stem: str, suffix: str) -> Path:
    """`text` written (atomically) as DIRECTORY/STEM-<hash of text>SUFFIX, unless that file holds it already."""
    path = directory / f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    return path
