"""Floors tied by accident are cut (#31): the results format never loads the configuration."""

from __future__ import annotations

from tests.unit.test_layout import _graph


def test_the_results_format_does_not_depend_on_the_configuration() -> None:
    graph = _graph()
    records = {name: deps for name, deps in graph.items() if name.startswith("device_matrix.records")}
    assert records
    tied = {name: sorted(d for d in deps if d == "device_matrix.config") for name, deps in records.items()}
    assert {name: deps for name, deps in tied.items() if deps} == {}


def test_a_row_name_has_one_rule() -> None:
    from device_matrix import config, names
    from device_matrix.records import schema

    assert config.ROW_NAME_RE is names.ROW_NAME_RE is schema.ROW_NAME_RE


def test_the_reports_do_not_import_the_tracker() -> None:
    # #31: report/ imported issues/ for neutralize and load_links; both live below both now
    graph = _graph()
    tied = {
        name: sorted(d for d in deps if d.startswith("device_matrix.issues"))
        for name, deps in graph.items()
        if name.startswith("device_matrix.report")
    }
    assert {name: deps for name, deps in tied.items() if deps} == {}
