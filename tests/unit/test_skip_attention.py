"""One rule for "a skip that needs attention", shared by triage and ``skips check`` (#41)."""

from __future__ import annotations

from device_matrix.report import markdown
from device_matrix.report.model import build
from device_matrix.skips import DeviceSkip, check
from tests import records as R


def _triage_md(cited: dict[str, str]) -> str:
    tests = [R.test(f"suites/x/test_x.py::test_{n}", "skipped", skip=R.skip_info(ref)) for n, ref in enumerate(cited)]
    t = build([R.record("cpu", tests)], [], {"cited": cited})  # type: ignore[list-item]
    return markdown.render(t)


def test_a_skip_whose_issue_is_missing_or_unknown_needs_attention_in_triage() -> None:
    md = _triage_md({"ledger:77": "missing", "#7": "unknown", "#8": "open", "#9": "closed"})
    assert "## Device skips (4: 3 need attention)" in md, md
    listed, _, held = md.partition("Skips with open issues")
    # test_0 cites ledger:77, test_1 #7, test_2 #8 (the one open issue), test_3 #9
    assert all(f"test_{n}`" in listed.partition("## Device skips")[2] for n in (0, 1, 3)), listed
    assert "test_2`" in held and all(f"test_{n}`" not in held for n in (0, 1, 3)), held
    assert "ledger:77 is missing: cite an issue that exists" in listed


def test_skips_check_and_triage_call_the_same_skip_a_problem() -> None:
    skip = DeviceSkip(
        mode="skip", devices=("cpu",), issue="ledger:77", reason="broken", source="pytest", file="t.py", line=3
    )
    (finding,) = check([skip], ledger=(frozenset({1}), "device-matrix-issues.toml"))
    assert finding.problem is not None and "ledger:77" in finding.problem
    md = _triage_md({"ledger:77": "missing"})
    assert "(1: 1 need attention)" in md and "Skips with open issues" not in md
