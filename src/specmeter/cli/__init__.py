"""The `specmeter` command line: app.py registers the commands, one module per larger command beside it."""

from specmeter.cli.app import app, main

__all__ = ["app", "main"]
