"""device_matrix.nox refuses bad input with an ERROR, a TIP and exit 3, before it defines a
session (#30 item 18): a project folder that is not there, a string for the list of rows,
a row in the ``python`` mapping that the project lacks, a session of the noxfile's own that
one of the rows would replace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nox
import pytest

import device_matrix.nox as dm_nox
from tests.unit.test_nox_api import registry, user_project

__all__ = ["registry"]  # a fixture, used by name


def refused(capsys: pytest.CaptureFixture[str], **kwargs: Any) -> str:
    with pytest.raises(SystemExit) as exit_info:
        dm_nox.sessions(**kwargs)
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and "\nTIP   " in err
    return err


def test_a_project_folder_that_is_not_there_is_refused(
    tmp_path: Path, registry: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, project=tmp_path / "nonexistent")
    assert str(tmp_path / "nonexistent") in err and registry == {}
    (tmp_path / "file").write_text("")
    assert "not a folder" in refused(capsys, project=tmp_path / "file")


def test_a_string_for_the_rows_is_refused_not_read_letter_by_letter(
    tmp_path: Path, registry: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, rows="cpu", project=user_project(tmp_path))
    assert "'c'" not in err and "'cpu'" in err and '["cpu"]' in err and registry == {}


def test_an_unknown_row_in_the_python_mapping_is_refused(
    tmp_path: Path, registry: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, python={"cpu": "3.11", "gpu": "3.10"}, project=user_project(tmp_path))
    assert "'gpu'" in err and "cpu" in err and registry == {}
    # a row of the project that this call does not define is a mistake too
    err = refused(capsys, rows=["cpu"], python={"tpu": "3.10"}, project=tmp_path)
    assert "'tpu'" in err


def test_a_session_of_the_noxfile_named_like_a_row_is_not_replaced(
    tmp_path: Path, registry: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    @nox.session(name="cpu")
    def mine(session: nox.Session) -> None:
        pass

    err = refused(capsys, project=user_project(tmp_path))
    assert "'cpu'" in err and registry["cpu"] is mine
    assert list(registry) == ["cpu"]  # nothing else was defined either
    # leaving the row out is the way: its own session stays
    assert "cpu" not in dm_nox.sessions(["tpu"], project=tmp_path)
