"""The tests of this concept that start a process; the rest are in tests/unit/test_noxfile.py (#41)."""

from __future__ import annotations

from tests.unit.test_noxfile import Recorder, sessions


def test_the_tests_session_keeps_its_own_pytest_cap() -> None:
    rec = Recorder()
    sessions()["tests"].func(rec)
    ((*install,),) = rec.installs
    assert "pytest<9.2" in install  # pytest-xdist#1386, for this session's --dist loadgroup only


def test_the_unit_session_runs_the_unit_tier_alone_and_tests_runs_both() -> None:
    runs = {}
    for name in ("tests", "unit"):
        rec = Recorder()
        sessions()[name].func(rec)
        ((*run,),) = rec.runs
        runs[name] = run
    assert runs["unit"][-1] == "tests/unit" and runs["tests"][-1] == "tests"  # the README's command: both tiers
    assert {"-p", "no:cacheprovider"} <= set(runs["unit"])
