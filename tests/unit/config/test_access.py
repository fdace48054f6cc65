"""The API key is one field (config/access.py): the one given, else $SPECMETER_API_KEY, else $OPENAI_API_KEY; no
--help prints the environment's."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.config.access import Access


def test_the_key_given_wins_then_the_environments_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECMETER_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert Access().api_key is None
    monkeypatch.setenv("OPENAI_API_KEY", "openai")
    assert Access().api_key == "openai"
    monkeypatch.setenv("SPECMETER_API_KEY", "ours")
    assert Access().api_key == "ours" and Access(api_key="given").api_key == "given"
    assert "ours" not in repr(Access())


@pytest.mark.parametrize("command", ["run", "sweep", "verify", "resume"])
def test_help_never_shows_the_environments_key(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.setenv("SPECMETER_API_KEY", "sk-environment-secret")
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--api-key" in result.output
    assert "sk-environment-secret" not in result.output
