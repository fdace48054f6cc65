"""A mkdocs hook that writes the CLI reference page (cli.md) from the command tree of `specmeter.cli` at build time.

The page is generated, never committed, so it cannot drift from the code: each visible command, its help, and its
arguments and options with the type and default that `--help` shows. Hidden commands and hidden options (internal
ones, deprecated aliases) are left out: the docs show the forms to use.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = "cli.md"
# `--help` appends "[default: X; x>=1; required]" to an option's help; the table gives those columns of their own.
_TRAILER = re.compile(r"\s*\[([^\[\]]*)\]\s*$")


def _root_command() -> Any:
    # Document the code of this checkout, not whatever specmeter the environment installed elsewhere.
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    import typer

    from specmeter import cli

    return typer.main.get_command(cli.app)


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell: no line breaks, no pipes, no raw HTML."""
    text = " ".join(text.split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _split_help(help_text: str) -> tuple[str, str, list[str]]:
    """(help, default, other notes) from a help record's text, e.g. 'Rounds.  [default: 2; x>=1]'."""
    match = _TRAILER.search(help_text)
    if match is None:
        return help_text, "", []
    default, notes = "", []
    for part in match.group(1).split(";"):
        part = part.strip()
        if part.startswith("default:"):
            default = part.removeprefix("default:").strip()
        elif part:
            notes.append(part)
    return help_text[: match.start()], default, notes


def _param_row(param: Any, ctx: Any) -> str | None:
    record = param.get_help_record(ctx)
    if record is None or getattr(param, "hidden", False) or param.name == "help":
        return None
    names, help_text = record
    help_text, default, notes = _split_help(help_text)
    if param.param_type_name == "argument":
        name = param.name.upper()
        kind = names.split(" ", 1)[1].strip("<>") if " " in names else ""
        notes = [n for n in notes if n != "required"]
        help_text = ("required. " if param.required else "optional. ") + help_text
    else:
        flags = [*param.opts, *param.secondary_opts]
        name = " / ".join(flags)
        # What follows the flags in the record is the type (typer writes it as <int>, click as INTEGER).
        kind = names.rsplit(flags[-1], 1)[-1].strip().strip("<>") if not param.is_flag else "flag"
        if param.multiple:  # typer writes list[str] for a repeated option: say what one value is
            kind = kind.removeprefix("list[").removesuffix("]") + ", repeatable"
        if param.is_flag and default and not default.startswith("-"):
            default = f"--{default}"  # a --x/--no-x pair's default is shown as the flag that is on
    bounds = [n for n in notes if n.startswith("x") or n.endswith("x")]  # a range: x>=1, 0<=x<=1
    if bounds:
        kind = f"{kind.removesuffix(' range')}, {', '.join(bounds)}"
    notes = [n for n in notes if n not in bounds]
    if notes:
        help_text = f"{help_text} ({'; '.join(notes)})"
    return f"| {_code(name)} | {_cell(kind)} | {_code(default)} | {_cell(help_text)} |"


def _command_section(cmd: Any, path: list[str], parent: Any) -> list[str]:
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
    lines = [f"## `{' '.join(path)}`", ""]
    if cmd.help:
        lines += [cmd.help.strip(), ""]
    rows = [row for param in cmd.get_params(ctx) if (row := _param_row(param, ctx)) is not None]
    if rows:
        lines += ["| argument / option | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    for name in cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []:
        sub = cmd.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            lines += _command_section(sub, [*path, name], ctx)
    return lines


def render() -> str:
    """The reference page's markdown."""
    root = _root_command()
    ctx = root.context_class(root, info_name="specmeter")
    visible = [name for name in root.list_commands(ctx) if not root.get_command(ctx, name).hidden]
    lines = [
        "# Command-line reference",
        "",
        "Generated from the code when this site is built: every command `specmeter --help` lists, its help and",
        "its arguments and options, with the type and default that `specmeter COMMAND --help` shows.",
        "",
        "Commands: " + ", ".join(f"[`{name}`](#specmeter-{name})" for name in visible) + ".",
        "",
    ]
    root_rows = [row for param in root.get_params(ctx) if (row := _param_row(param, ctx)) is not None]
    if root_rows:
        lines += ["Options of `specmeter` itself:", "",
                  "| option | type | default | what it does |", "|---|---|---|---|", *root_rows, ""]
    for name in visible:
        lines += _command_section(root.get_command(ctx, name), ["specmeter", name], ctx)
    return "\n".join(lines) + "\n"


def on_files(files: Any, config: Any) -> Any:
    """mkdocs event: add the generated page to the site's files before the nav is built."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
