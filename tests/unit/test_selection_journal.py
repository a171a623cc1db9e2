"""The journal's deselected event (#34): the tests --dm-deselect left out, checked and folded as every event."""

from __future__ import annotations

from device_matrix import wire
from device_matrix.run.journal import Fold


def test_the_deselected_event_is_checked_as_the_journal_checks_every_event() -> None:
    assert wire.check_event({"e": "deselected", "n": 2, "nodeids": ["a.py::t"]}, 2) is None
    assert (
        wire.check_event({"e": "deselected", "n": 2, "nodeids": [3]}, 2)
        == "event 'deselected': a nodeid is not a string"
    )
    fold = Fold()
    for event in ({"e": "session", "pid": 1, "t": 0.0}, {"e": "deselected", "nodeids": ["a.py::t"]}):
        fold.append(str(event.pop("e")), **event)
    assert fold.broken is None and fold.deselected == ["a.py::t"]

    # a later one adds to it; one of another shape breaks the journal
    fold.append("deselected", nodeids=["b.py::u"])
    assert fold.deselected == ["a.py::t", "b.py::u"]
    fold.append("deselected", nodeids="b.py::u")
    assert fold.broken == "event 'deselected': field 'nodeids' is str"
