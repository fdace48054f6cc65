"""Stage 1, the corpus: the standard library's ``.py`` files split into train and held-out files, and the
documented functions and classes found in them."""

from __future__ import annotations

import ast
import hashlib
import sysconfig
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

EXCLUDED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


@dataclass(frozen=True)
class SourceFile:
    """One standard-library source file."""

    relpath: str
    text: str


def stdlib_dir() -> Path:
    """Directory of the running interpreter's standard library sources."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_heldout(relpath: str, heldout_mod: int) -> bool:
    """Deterministic held-out split: 1 in ``heldout_mod`` files by hash of the relative path."""
    digest = hashlib.sha256(relpath.encode()).digest()
    return int.from_bytes(digest[:4], "big") % heldout_mod == 0


def collect_corpus(heldout_mod: int = 20, max_file_bytes: int = 400_000) -> tuple[list[SourceFile], list[SourceFile]]:
    """Read the stdlib ``.py`` files (sorted, tests excluded) and split them into (train, held-out)."""
    root = stdlib_dir()
    train: list[SourceFile] = []
    heldout: list[SourceFile] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(part in EXCLUDED_DIRS for part in Path(rel).parts[:-1]):
            continue
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        if not raw.strip() or len(raw) > max_file_bytes:
            continue
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
        (heldout if is_heldout(rel, heldout_mod) else train).append(SourceFile(rel, text))
    return train, heldout


@dataclass(frozen=True)
class DocItem:
    """A documented function or class found in a source file."""

    module: str
    name: str
    signature: str
    summary: str
    docstring: str
    source: str
    kind: str


def module_name(relpath: str) -> str:
    """The dotted module name of a stdlib file."""
    name = relpath[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def extract_doc_items(files: Sequence[SourceFile], max_source_chars: int = 1500) -> list[DocItem]:
    """Documented top-level functions/classes and methods, with their source and docstring."""
    items: list[DocItem] = []
    for f in files:
        try:
            tree = ast.parse(f.text)
        except (SyntaxError, ValueError):
            continue
        module = module_name(f.relpath)
        lines = f.text.split("\n")
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc or len(doc) < 40:
                continue
            src = _source_segment(lines, node)
            if not src or len(src) > max_source_chars:
                continue
            summary = " ".join(doc.strip().split("\n\n")[0].split())
            if not 20 <= len(summary) <= 300:
                continue
            if isinstance(node, ast.ClassDef):
                sig, kind = node.name, "class"
            else:
                try:
                    sig = f"{node.name}({ast.unparse(node.args)})"
                except Exception:  # unparse of exotic defaults
                    sig = f"{node.name}(...)"
                kind = "function"
            items.append(DocItem(module, node.name, sig, summary, doc.strip(), src, kind))
    return items


def _source_segment(lines: Sequence[str], node: ast.stmt) -> str | None:
    """Source text of ``node`` (dedented); a fast ``ast.get_source_segment`` for many nodes."""
    end, end_col = node.end_lineno, node.end_col_offset
    if end is None or end_col is None:
        return None
    first_b = lines[node.lineno - 1].encode()
    if end == node.lineno:
        seg = first_b[node.col_offset : end_col].decode(errors="replace")
    else:
        first = first_b[node.col_offset :].decode(errors="replace")
        last = lines[end - 1].encode()[:end_col].decode(errors="replace")
        seg = "\n".join([first, *lines[node.lineno : end - 1], last])
    return textwrap.dedent(" " * node.col_offset + seg)

