"""The manual builds, and every specmeter command line it shows is one the CLI accepts.

The site is built strictly (a broken link or anchor, a page outside the nav fails it), with the CLI reference the
build generates from the code. Every command line in README.md and docs/*.md that runs specmeter is checked
against the command tree: the command must exist and so must each --flag it names, as a visible option: a hidden
alias still works for a while, but the docs show the form to use.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from specmeter.cli import app

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# How a command line may start, and the specmeter command words that start stands for.
PREFIXES = {"specmeter": [], ".venv/bin/specmeter": [], "scripts/demo.sh": ["demo"]}
# A shell word that ends the specmeter command: a pipe, a redirection, the next command.
_SHELL_END = {"|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1", "<"}
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"`([^`]+)`")
_NUMBER = re.compile(r"^-\d")


@dataclass(frozen=True)
class CommandLine:
    where: str  # file:line, for the message
    text: str


def _fenced_and_prose(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines inside code fences, lines outside them), each with its 1-based line number."""
    fenced: list[tuple[int, str]] = []
    prose: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            inside = not inside
            continue
        (fenced if inside else prose).append((number, line))
    return fenced, prose


def _starts_command(text: str) -> bool:
    return any(text == prefix or text.startswith(prefix + " ") for prefix in PREFIXES)


def command_lines(text: str, name: str) -> list[CommandLine]:
    """Every command line in a page that runs specmeter: in code blocks (continuation lines joined) and in inline
    code spans of the prose (which may wrap across lines)."""
    fenced, prose = _fenced_and_prose(text)
    found: list[CommandLine] = []
    pending: tuple[int, str] | None = None
    for number, line in fenced:
        start, text = pending if pending is not None else (number, "")
        text += line.strip() + " "
        if line.rstrip().endswith("\\"):
            pending = (start, text.rstrip()[:-1])
            continue
        pending = None
        text = " ".join(text.split()).removeprefix("$ ")
        if _starts_command(text):
            found.append(CommandLine(f"{name}:{start}", text))
    # Inline spans: join the prose into paragraphs so a span that wraps is read whole.
    paragraph: list[tuple[int, str]] = []
    for number, line in [*prose, (0, "")]:
        if line.strip():
            paragraph.append((number, line))
            continue
        if paragraph:
            joined = " ".join(part.strip() for _, part in paragraph)
            found += [CommandLine(f"{name}:{paragraph[0][0]}", span.strip())
                      for span in _INLINE.findall(joined) if _starts_command(span.strip())]
        paragraph = []
    return found


def _visible(group: Any, ctx: Any) -> dict[str, Any]:
    names = group.list_commands(ctx) if hasattr(group, "list_commands") else []
    commands = {name: group.get_command(ctx, name) for name in names}
    return {name: cmd for name, cmd in commands.items() if cmd is not None and not cmd.hidden}


def _flags(cmd: Any, ctx: Any) -> set[str]:
    return {flag for param in cmd.get_params(ctx) if param.param_type_name == "option" and not param.hidden
            for flag in [*param.opts, *param.secondary_opts]}


def problems_of(line: CommandLine, root: Any) -> list[str]:
    """What in one command line the CLI does not accept: an unknown command, a flag that is not a visible option."""
    try:
        words = shlex.split(line.text, comments=True)
    except ValueError as exc:
        return [f"{line.where}: cannot split `{line.text}` as a shell line ({exc})"]
    prefix = next(p for p in sorted(PREFIXES, key=len, reverse=True) if words[0] == p)
    words = [*PREFIXES[prefix], *words[1:]]
    cmd, ctx, path = root, root.context_class(root, info_name="specmeter"), ["specmeter"]
    chosen = not hasattr(root, "list_commands")
    found: list[str] = []
    for raw in words:
        if raw in _SHELL_END or raw.startswith((">", "2>")):
            break
        word = raw.strip("[]")  # usage notation: [--max-al-drop 2%]
        if word.startswith("-") and len(word) > 1 and not _NUMBER.match(word) and word != "...":
            flag = word.split("=", 1)[0]
            if flag not in _flags(cmd, ctx):
                found.append(f"{line.where}: `{' '.join(path)}` has no option {flag} (in `{line.text}`)")
        elif not chosen:
            commands = _visible(cmd, ctx)
            if word not in commands:
                found.append(f"{line.where}: `{' '.join(path)}` has no command {word!r} (in `{line.text}`)")
                break
            cmd = commands[word]
            ctx = cmd.context_class(cmd, info_name=word, parent=ctx)
            path.append(word)
            chosen = not hasattr(cmd, "list_commands")
    return found


def test_the_command_lines_in_the_docs_are_ones_the_cli_accepts() -> None:
    root = typer.main.get_command(app)
    lines = [line for page in PAGES
             for line in command_lines(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]
    assert len({line.where.split(":")[0] for line in lines}) >= 5, "the pages show command lines: expected them found"
    problems = [problem for line in lines for problem in problems_of(line, root)]
    assert problems == [], "\n".join(problems)


def test_a_hidden_alias_or_a_misspelt_flag_is_caught() -> None:
    """The check itself: what it must refuse, on the live command tree (a hidden option exists but is not shown)."""
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="specmeter")
    hidden = next((f"{name} {param.opts[0]}" for name, cmd in _visible(root, ctx).items()
                   for param in cmd.params if param.param_type_name == "option" and param.hidden and param.opts),
                  None)
    bad = ["specmeter report runs/x --htlm page.html", "specmeter no-such-command", *([f"specmeter {hidden}"]
                                                                                      if hidden else [])]
    for text in bad:
        assert problems_of(CommandLine("x.md:1", text), root), text
    assert problems_of(CommandLine("x.md:1", "scripts/demo.sh --max-rounds 3 # a comment --nope"), root) == []
    assert problems_of(CommandLine("x.md:1", "specmeter report runs/<id> --html p.html > out.txt --x"), root) == []


def test_inline_and_wrapped_command_lines_are_found() -> None:
    text = ("Run `specmeter report\nruns/a --html p.html` now.\n\n```bash\n$ specmeter sweep s.yaml \\\n"
            "    --dry-run   # first\nls runs\n```\n")
    found = command_lines(text, "docs/x.md")
    assert [(line.where, line.text) for line in found] == [
        ("docs/x.md:5", "specmeter sweep s.yaml --dry-run # first"),
        ("docs/x.md:1", "specmeter report runs/a --html p.html"),
    ]


def test_the_site_builds_strictly_with_every_command_in_its_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    reference = (site / "cli" / "index.html").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="specmeter")
    for name in _visible(root, ctx):
        assert f'id="specmeter-{name}"' in reference, f"the CLI reference has no section for {name}"


def test_the_readme_is_the_front_door() -> None:
    """At most 300 lines, the two commands first (and there), and every relative link it makes resolves."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[0] for line in first_block.splitlines()] == ["scripts/demo.sh", "scripts/test.sh"]
    assert all((ROOT / script).is_file() for script in ("scripts/demo.sh", "scripts/test.sh"))
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", readme)
    broken = [t for t in targets if not t.startswith(("http://", "https://")) and not (ROOT / t).exists()]
    assert targets and broken == []
