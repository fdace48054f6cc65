"""specmeter's command line run inside the test's process, as `python -m specmeter.cli` runs it (cli.app.main, the
same entry point): its exit code and what it printed to stdout and stderr. Without an interpreter start and the
imports per command (about two seconds each, three with the HTML page's plotting library), which a campaign of
many short commands against servers in this process would pay again and again. What escapes main() is
written to stderr as the interpreter would print it, a traceback with exit 1, so a test that asserts no traceback
catches it the same way."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import traceback
from pathlib import Path

from specmeter.cli.app import main


def specmeter(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `specmeter ARGS` in `cwd` (None: where the test is) in this process and return what a subprocess run
    would."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    argv_before = sys.argv
    sys.argv = ["specmeter", *argv]
    try:
        with contextlib.chdir(cwd or Path.cwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                if isinstance(exc.code, str):  # sys.exit("text"): the interpreter prints it, exit 1
                    err.write(exc.code + "\n")
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except Exception:  # what the interpreter would print for an exception main() let through
                err.write(traceback.format_exc())
                code = 1
    finally:
        sys.argv = argv_before
    return subprocess.CompletedProcess(["specmeter", *argv], code, out.getvalue(), err.getvalue())
