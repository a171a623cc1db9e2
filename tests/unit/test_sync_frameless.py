"""A crash whose fingerprint holds no frame of the project's (an abort under XLA's handler
before a Python stack could be taken: "no frames to fingerprint") is never linked to another
test's crash issue (#29): every abort in any project would share one fingerprint."""

from __future__ import annotations

from typing import Any

from device_matrix.diagnostics.fingerprint import NO_FRAMES
from device_matrix.issues.sync import collect
from tests import records as R


def _frameless(nodeid: str, *, frames: bool = False) -> dict[str, Any]:
    crash = R.crash("cpu", nodeid, "be1c43b287a76dd2", signal="SIGABRT")
    crash["diagnosis"]["fingerprint_basis"] = ["SIGABRT", "t.py:helper" if frames else NO_FRAMES]
    return crash


def test_frameless_crashes_of_two_tests_are_two_findings_and_one_test_is_one() -> None:
    first = R.record("cpu", [R.test("t.py::test_a", "crashed")], [_frameless("t.py::test_a")])
    second = R.record("cpu", [R.test("t.py::test_b", "crashed")], [_frameless("t.py::test_b")])
    again = R.record("cpu", [R.test("t.py::test_a", "crashed")], [_frameless("t.py::test_a")])
    findings, _ = collect([first, second, again])  # type: ignore[list-item]
    assert sorted(f.nodeids[0] for f in findings) == ["t.py::test_a", "t.py::test_b"]
    (a,) = [f for f in findings if f.nodeids == ["t.py::test_a"]]
    assert len(a.runs) == 2  # the same test's crash again is the same finding
    assert all(f.fingerprint.startswith("crash-be1c43b287a76dd2:") for f in findings)


def test_crashes_with_the_projects_frames_are_one_finding_across_tests() -> None:
    recs = [
        R.record("cpu", [R.test(n, "crashed")], [_frameless(n, frames=True)]) for n in ("t.py::test_a", "t.py::test_b")
    ]
    (f,), _ = collect(recs)  # type: ignore[arg-type]
    assert f.fingerprint == "crash-be1c43b287a76dd2" and f.nodeids == ["t.py::test_a", "t.py::test_b"]


def test_a_frameless_crash_is_filed_once_and_its_issue_found_again() -> None:
    from device_matrix.issues.base import FINGERPRINT_END_RE, FINGERPRINT_MARKER

    (f,), _ = collect([R.record("cpu", [R.test("t.py::test_a", "crashed")], [_frameless("t.py::test_a")])])  # type: ignore[list-item]
    body = "text\n" + FINGERPRINT_MARKER.format(f.fingerprint)
    found = FINGERPRINT_END_RE.search(body)
    assert found is not None and found.group(1) == f.fingerprint  # read back: never filed twice


def test_frameless_crashes_outside_a_test_are_told_apart_by_their_phase() -> None:
    exit_crash = _frameless("t.py::test_a")
    exit_crash.update(nodeid=None, phase="exit", when=None)
    collect_crash = {**_frameless("t.py::test_a"), "nodeid": None, "phase": "collect", "when": None}
    recs = [R.record("cpu", [], [exit_crash]), R.record("cpu", [], [collect_crash]), R.record("cpu", [], [exit_crash])]
    findings, _ = collect(recs)  # type: ignore[arg-type]
    assert len(findings) == 2 and sorted(len(f.runs) for f in findings) == [1, 2]
