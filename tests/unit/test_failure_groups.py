"""Failure groups (#32): every failure of a run in one group by its cause, across rows, and
the reports (triage.md, triage.html, triage.json, the step summary, the pull request's
comment) leading with them, every group holding a ``new`` failure listed first.

The fixture has known truth: 300 failures in 4 causes over 2 rows, each message carrying
its own temp path and UUID, as pytest's long tracebacks show them.
"""

from __future__ import annotations

import html as htmlmod
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

from device_matrix.cli.triage import run_triage
from device_matrix.output import Output
from device_matrix.report import group_views, groups, markdown
from device_matrix.report.groups import failure_signature
from device_matrix.report.model import Triage, build
from device_matrix.report.signature import innermost_frame, mask
from device_matrix.report.verdict_views import comment
from tests import records as R


def _traceback(test: str, exception: str, *, frames: tuple[str, ...]) -> str:
    """A failure's text as pytest's long traceback writes it: each frame's source, its E
    lines at the innermost, and each frame's ``path:line:`` after it."""
    out = [f"    def {test}(tmp_path):", ">       run(tmp_path)", ""]
    for n, frame in enumerate(frames):
        last = n == len(frames) - 1
        if last:
            out += ["    def run(p):", ">       raise Boom(p)", f"E       {exception}", ""]
        out.append(f"{frame}: {exception.split(':', maxsplit=1)[0] if last else ''}")
        if not last:
            out.append("_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _")
    return "\n".join(out)


def _temp(i: int) -> str:
    return f"/tmp/pytest-of-ci/pytest-{i % 9 + 3}/test_case_{i}0"


# the 4 causes, and where each is raised in the project's own code; the last is raised in
# an installed package, under the test's own frame
CAUSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "connect": (
        "OSError: We couldn't connect to 'https://huggingface.co:{port}' to load {tmp}/config-{uid}.json",
        ("tests/test_models.py:{line}", "src/pkg/hub.py:41"),
    ),
    "shape": (
        "RuntimeError: shape mismatch at 0x{pointer:x}: tensor {hash} has [{n}, 128], expected [{n}, 64]",
        ("tests/test_ops.py:{line}", "src/pkg/ops.py:88"),
    ),
    "missing": (
        "FileNotFoundError: [Errno 2] No such file or directory: '{tmp}/cache/{uid}/weights.bin'",
        ("tests/test_io.py:{line}", "src/pkg/io.py:12"),
    ),
    "assert": (
        "AssertionError: run {uid} diverged after {n} steps (loss {loss})",
        ("tests/test_train.py:30", "/usr/lib/python3/site-packages/torch/testing/_compare.py:{line}"),
    ),
}
# per cause, tests on cpu and on tpu: 300 in all
SPREAD = {"connect": (90, 30), "shape": (60, 40), "missing": (30, 20), "assert": (20, 10)}


def _failure(cause: str, i: int) -> dict[str, Any]:
    text, frames = CAUSES[cause]
    exception = text.format(
        port=40000 + i,
        tmp=_temp(i),
        uid=uuid.UUID(int=i * 7919 + 1),
        pointer=0x7F3A00000000 + i * 64,
        hash=f"{i * 104729 + 0xABCDEF:012x}",
        n=i,
        loss=f"{i / 7:.4f}",
    )
    placed = tuple(f.format(line=10 + i % 5) for f in frames)
    message = _traceback(f"test_{cause}_{i}", exception, frames=placed)
    t = R.test(f"tests/test_{cause}.py::test_{cause}[{i}]", "failed", message=message)
    t["cause"] = exception
    t["file"], t["line"] = placed[0].rsplit(":", 1)[0], int(placed[0].rsplit(":", 1)[1])
    return t


def _known_truth() -> list[dict[str, Any]]:
    recs = []
    for r, row in enumerate(("cpu", "tpu")):
        tests = [_failure(cause, i) for cause, counts in SPREAD.items() for i in range(counts[r])]
        tests += [R.test(f"tests/test_ok.py::test_ok[{i}]") for i in range(25)]
        recs.append(R.record(row, tests))
    return recs


def _triage(
    tmp: Path,
    name: str,
    recs: list[dict[str, Any]],
    *,
    history: Path | None = None,
    source: dict[str, Any] | None = None,
) -> tuple[Triage, Path, str]:
    results = tmp / name
    for rec in recs:
        (results / rec["row"]).mkdir(parents=True)
        if source is not None:
            rec["source"] = source
        (results / rec["row"] / "run.json").write_text(json.dumps(rec))
    summary = tmp / f"{name}-summary.md"
    out = Output(io.StringIO(), environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    t = run_triage(results, results / "triage", history, name, out)
    return t, results / "triage", summary.read_text(encoding="utf-8")


# --- the signature ------------------------------------------------------------------------


def test_the_same_failure_with_another_temp_dir_uuid_hash_pointer_or_port_has_one_signature() -> None:
    one = _failure("connect", 1)["cause"]
    two = _failure("connect", 2)["cause"]
    assert one != two
    assert mask(one) == mask(two) == ("OSError: We couldn't connect to 'https://huggingface.co:N' to load <tmp>")
    a, b = _failure("shape", 3)["cause"], _failure("shape", 250)["cause"]
    assert mask(a) == mask(b) == "RuntimeError: shape mismatch at N: tensor <hex> has [N, N], expected [N, N]"
    assert mask("No such file: '/home/ci/work/cache/7d3f1a2b/x.bin'") == "No such file: '<path>'"
    assert mask(f"seed {uuid.UUID(int=5)} done") == "seed <uuid> done"
    # what names the failure stays: the words, the exception's type, a relative path
    assert mask("KeyError: 'weight' in pkg/model.py") == "KeyError: 'weight' in pkg/model.py"
    # two different failures stay two: another key, another file of the project, a URL's host
    assert mask("KeyError: 'weight'") != mask("KeyError: 'bias'")
    assert mask("cannot load pkg/a.py") != mask("cannot load pkg/b.py")
    assert mask("GET https://hub.example/api/models failed") == "GET https://hub.example/api/models failed"
    assert failure_signature("E: x", "pkg/a.py:3") != failure_signature("E: x", "pkg/b.py:3")


def test_the_innermost_frame_is_the_deepest_in_the_projects_own_code() -> None:
    assert innermost_frame(_failure("connect", 1)["message"]) == "src/pkg/hub.py:41"
    # an installed package's frame is not the project's: the test's own is the innermost
    assert innermost_frame(_failure("assert", 1)["message"]) == "tests/test_train.py:30"
    assert innermost_frame("boom") is None and innermost_frame(None) is None


# --- the fixture with known truth ---------------------------------------------------------

TRUTH = {  # cause -> (total, per row), largest first
    "connect": (120, {"cpu": 90, "tpu": 30}),
    "shape": (100, {"cpu": 60, "tpu": 40}),
    "missing": (50, {"cpu": 30, "tpu": 20}),
    "assert": (30, {"cpu": 20, "tpu": 10}),
}


def test_300_failures_of_4_causes_over_2_rows_are_4_groups_in_every_report(tmp_path: Path) -> None:
    t, out, summary = _triage(tmp_path, "run", _known_truth())
    assert len(t["failures"]) == 300
    data = json.loads((out / "triage.json").read_text())
    got = [(g["count"], g["rows"], g["tests"][0]["nodeid"]) for g in data["groups"]]
    assert got == [(n, rows, f"tests/test_{c}.py::test_{c}[0]") for c, (n, rows) in TRUTH.items()]
    assert sum(len(g["tests"]) for g in data["groups"]) == 300  # triage.json: every test of every group
    assert data["groups"][0]["frame"] == "src/pkg/hub.py:41"
    assert data["groups"][0]["tests"][0]["where"] == "tests/test_models.py:10"

    md = (out / "triage.md").read_text()
    for text in (md, summary, comment(_with_verdicts(t), None)):
        assert "Failure groups (4 groups, 300 tests)" in text
        lines = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
        assert len(lines) == 4
        for line, (cause, (n, rows)) in zip(lines, TRUTH.items(), strict=True):
            assert f"{n} tests: {rows['cpu']} on cpu, {rows['tpu']} on tpu" in line
            assert f"test_{cause}[0]" in line and f"… {n - groups.TESTS_SHOWN} more" in line
        assert "@ `src/pkg/hub.py:41`" in lines[0] and "@ `tests/test_train.py:30`" in lines[3]

    page = (out / "triage.html").read_text()
    rows = re.findall(r"<tr id='group-\d+'.*?</tr>", page)
    assert len(rows) == 4
    for row, (n, spread) in zip(rows, TRUTH.values(), strict=True):
        assert f"{n} tests: {spread['cpu']} on cpu, {spread['tpu']} on tpu" in htmlmod.unescape(row)
        assert f"… {n - groups.TESTS_SHOWN} more (see triage.json)" in row
    # the report leads with them: the groups come before the list of failures
    assert page.index("id='groups'") < page.index("id='failures'")
    assert md.index("## Failure groups") < md.index("## Failures")


def _with_verdicts(t: Triage) -> Triage:
    """A push's triage has no verdicts; the comment is drawn from them, none given here."""
    return {**t, "verdicts": {**_empty_verdicts(), "items": []}}  # type: ignore[typeddict-item]


def _empty_verdicts() -> dict[str, Any]:
    return {
        "base": "main",
        "base_lane": "branch:main",
        "base_commit": None,
        "base_runs": 0,
        "run_ids": [],
        "line": "",
        "counts": {},
        "items": [],
    }


# --- Seen 4 and 5: a pull request's new failures never hidden ---------------------------


def _pr_records(*, on_main: bool) -> list[dict[str, Any]]:
    """60 failures, each its own cause: 48 broken on main (named first), 12 the change adds."""
    tests = []
    for i in range(60):
        broken = i < 48
        if not on_main or broken:
            # each run its own temp dir: the same failure on main and on the pull request
            tmp = _temp(i + (0 if on_main else 1000))
            exc = f"ValueError: case {chr(97 + i // 26)}{chr(97 + i % 26)} cannot read {tmp}/data.json"
            t = R.test(f"tests/test_{'a' if broken else 'z'}{i:02d}.py::test_it", "failed", message=f"E   {exc}")
            t["cause"] = exc
        else:
            t = R.test(f"tests/test_z{i:02d}.py::test_it")
        tests.append(t)
    return [R.record("cpu", tests)]


def _pr_triage(tmp_path: Path) -> tuple[Triage, Path, str]:
    history = tmp_path / "h.sqlite"
    main = R.source(pr=None, commit="a" * 40, run_id="a" * 8)
    _triage(tmp_path, "main", _pr_records(on_main=True), history=history, source=main)
    pr = R.source(pr=7, commit="b" * 40, run_id="b" * 8)
    return _triage(tmp_path, "pr", _pr_records(on_main=False), history=history, source=pr)


def test_a_failure_already_on_main_with_another_temp_dir_is_broken_on_base(tmp_path: Path) -> None:
    t, _, _ = _pr_triage(tmp_path)
    v = t["verdicts"]
    assert v is not None
    verdicts = {i["nodeid"]: i["verdict"] for i in v["items"] if i["nodeid"]}
    assert [n for n, x in verdicts.items() if x == "broken-on-base"] == [
        f"tests/test_a{i:02d}.py::test_it" for i in range(48)
    ]
    assert sorted(n for n, x in verdicts.items() if x == "new") == [
        f"tests/test_z{i}.py::test_it" for i in range(48, 60)
    ]


def test_every_new_failure_is_listed_first_in_the_comment_and_the_markdown(tmp_path: Path) -> None:
    t, out, summary = _pr_triage(tmp_path)
    new = [f"tests/test_z{i}.py::test_it" for i in range(48, 60)]
    md = (out / "triage.md").read_text()
    for text in (md, summary, comment(t, None)):
        part = text[text.index("Failure groups (60 groups, 60 tests)") :]
        part = part[: part.index("more groups")]
        lines = [line for line in part.splitlines() if re.match(r"\| \d+ \|", line)]
        assert len(lines) == groups.GROUPS_LISTED
        assert all("new" in line for line in lines[:12]) and all("broken on base" in line for line in lines[12:])
        assert sorted(re.search(r"`(tests/test_z\d+\.py::test_it)`", line)[1] for line in lines[:12]) == new  # type: ignore[index]
        assert f"… {60 - groups.GROUPS_LISTED} more groups ({60 - groups.GROUPS_LISTED} tests; see triage.json)" in text
        # the verdicts' table lists every new failure too, before the others
        verdicts = text[text.index("Verdicts: is this failure mine?") :]
        rows = [line for line in verdicts.splitlines() if line.startswith("| cpu |")]
        assert [n for n in new if f"`{n}`" in "\n".join(rows[:12])] == new
        assert "… and 10 more (10 broken on base; see triage.json)" in verdicts
    data = json.loads((out / "triage.json").read_text())
    assert [g["lead"] for g in data["groups"]] == ["new"] * 12 + ["broken-on-base"] * 48


# --- crashes, and the order of classes ---------------------------------------------------


def test_a_crash_is_one_group_by_its_fingerprint_across_rows_and_tests() -> None:
    recs = [
        R.record(
            row,
            [R.test(f"t.py::test_{n}", "crashed", crash_id=f"{row}-{i}") for i, n in enumerate("ab", 1)],
            [R.crash(row, f"t.py::test_{n}", "fpseg", index=i) for i, n in enumerate("ab", 1)],
        )
        for row in ("cpu", "tpu")
    ]
    recs[1]["tests"].append(R.test("t.py::test_c", "failed", message="E   KeyError: 'w'"))
    recs[0]["crashes"][0]["issue"] = "ledger:3"
    t = build(recs, [], {})  # type: ignore[arg-type]
    got = groups.of(t)
    assert [(g["signature"], g["count"], g["rows"]) for g in got] == [
        ("crash fpseg", 4, {"cpu": 2, "tpu": 2}),
        ("KeyError: 'w'", 1, {"tpu": 1}),
    ]
    assert got[0]["tests"][0] == {
        "row": "cpu",
        "nodeid": "t.py::test_a",
        "outcome": "crashed",
        "where": None,
        "verdict": None,
    }
    (line,) = [x for x in "\n".join(group_views.markdown(t)).splitlines() if x.startswith("| 1 |")]
    assert "(`fpseg`)" in line and line.endswith("| ledger:3 (state unknown) |")


def test_groups_are_ordered_new_unstable_flaky_broken_infrastructure_then_by_size() -> None:
    classes = ["broken-on-base", "flaky", "new", "device-unstable", "infrastructure"]
    tests, items = [], []
    for k, verdict in enumerate(classes):
        for j in range(k + 1):  # the later a class in this list, the larger its group
            nodeid = f"t.py::test_{k}_{j}"
            tests.append(R.test(nodeid, "failed", message=f"E   ValueError: cause {'vwxyz'[k]}"))
            items.append({"row": "cpu", "nodeid": nodeid, "verdict": verdict})
    # one more group, of 9 broken-on-base tests and one new: its new failure leads it
    for j in range(10):
        nodeid = f"t.py::test_big_{j}"
        tests.append(R.test(nodeid, "failed", message="E   ValueError: big"))
        items.append({"row": "cpu", "nodeid": nodeid, "verdict": "new" if j == 3 else "broken-on-base"})
    t = build([R.record("cpu", tests)], [], {})  # type: ignore[list-item]
    t["verdicts"] = {**_empty_verdicts(), "items": items}  # type: ignore[typeddict-item]
    got = [(g["lead"], g["count"]) for g in groups.of(t)]
    assert got == [
        ("new", 10),
        ("new", 3),
        ("device-unstable", 4),
        ("flaky", 2),
        ("broken-on-base", 1),
        ("infrastructure", 5),
    ]
    assert groups.of(t)[0]["verdicts"] == {"new": 1, "broken-on-base": 9}


def test_a_row_jobs_step_summary_leads_with_its_groups() -> None:
    t = build([_known_truth()[0]], [], {})  # type: ignore[list-item]
    text = markdown.render_rows(t)
    assert "## Failure groups (4 groups, 200 tests)" in text
    assert text.index("## Failure groups") < text.index("## Failures")
    assert "90 tests: 90 on cpu" in text
