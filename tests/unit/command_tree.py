"""specmeter's command tree as click holds it: every command, with its full name, for tests that walk it."""

from __future__ import annotations

from typing import Any

import typer.main

from specmeter.cli import app


def commands(group: Any = None, path: str = "") -> list[tuple[str, Any]]:
    """Every command of the tree (subcommands of `data` included), hidden ones too, with its full name."""
    group = typer.main.get_command(app) if group is None else group
    out = []
    for name, command in group.commands.items():
        full = f"{path} {name}".strip()
        out += commands(command, full) if hasattr(command, "commands") else [(full, command)]
    return out
