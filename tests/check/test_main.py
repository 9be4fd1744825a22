"""The ``groundwatch`` command itself: version and help."""

from __future__ import annotations

import pytest

import groundwatch
from groundwatch.cli import main


def test_version_names_the_installed_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"groundwatch {groundwatch.__version__}"


def test_no_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    help_text = capsys.readouterr().out
    assert "check" in help_text and "demo" in help_text
