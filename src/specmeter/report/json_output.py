"""JSON output: the stored summary.json content as is, for machines (to a file, or stdout for pipes)."""

from __future__ import annotations

import sys
from pathlib import Path

from specmeter.report.outputs import Output
from specmeter.rundir.run_data import RunData
from specmeter.rundir.store import atomic_write_text


class JsonOutput(Output):
    """The run summary as JSON (indent 2): to `dest`, or to stdout when dest is None."""

    kind = "json"

    def write(self, run: RunData) -> list[Path]:
        text = run.summary.model_dump_json(indent=2) + "\n"
        if self.dest is None:
            sys.stdout.write(text)
            return []
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.dest, text)
        return [self.dest]
