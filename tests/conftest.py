"""Shared test setup: the fake engine package (fakeengine) and the helper modules (data_fixtures,
vllm_helpers) import by name."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specmeter.telemetry.host import OFF_ENV

_TESTS = Path(__file__).resolve().parent
# The unit tests' folders too: some import another's builders by module name (test_recommend's sweeps), which must
# work whichever file pytest is given.
_UNIT = sorted(p for p in (_TESTS / "unit").iterdir() if p.is_dir() and not p.name.startswith("__"))
for sub in (_TESTS, _TESTS / "unit", *_UNIT, _TESTS / "integration"):
    if str(sub) not in sys.path:
        sys.path.insert(0, str(sub))

# scripts/test.sh runs the engines' installs (llama-server's build, arctic-inference, Chromium, Slurm) in the
# background beside the tests that need none of them, and names here the file their exit status is written to.
INSTALLS_STATUS = "SPECMETER_TEST_INSTALLS_STATUS"
INSTALLS_PID = "SPECMETER_TEST_INSTALLS_PID"  # the installs' process: gone without a status, they were killed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


@pytest.fixture(scope="session")
def installed() -> None:
    """Waits for the test command's background installs, for the tests that use what they install. Without the
    test command (pytest run by hand) there is nothing to wait for: a missing install fails its test by name."""
    status_file = os.environ.get(INSTALLS_STATUS)
    if not status_file:
        return
    path, pid = Path(status_file), int(os.environ.get(INSTALLS_PID) or 0)
    while not path.exists():
        if pid and not _running(pid) and not path.exists():
            pytest.fail("the engines' setup ended without writing its status (was it killed?): scripts/test.sh "
                        "prints its output after the tests")
        time.sleep(2)
    status = path.read_text(encoding="utf-8").strip()
    if status != "0":
        pytest.fail(f"the engines' setup failed (exit {status}): scripts/test.sh prints its output after the tests")


@pytest.fixture(autouse=True, scope="session")
def _no_host_probe() -> Iterator[None]:
    """The host probe is off in the tests (for the subprocesses they start too). The unit tests run on every core
    at once, so every round of a run inside one would read as disturbed by its neighbours; the integration tests
    check what the engines do, and on a CI machine shared with other work a probe would set rounds aside and run
    them again, so their rounds, time and verdicts would follow the neighbours. The unit tests of the judgement
    give readings by hand; the e2e demo runs with the probe on and checks what it read of the real host."""
    before = os.environ.get(OFF_ENV)
    os.environ[OFF_ENV] = "off"
    yield
    if before is None:
        os.environ.pop(OFF_ENV, None)
    else:
        os.environ[OFF_ENV] = before


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that use the installs run last (in their order), so that everything else runs while the
    installs are under way. Whole modules move, so module-scoped fixtures still set up once."""
    needs = {item.path for item in items if "installed" in item.fixturenames}
    items.sort(key=lambda item: item.path in needs)
