"""The tests of this concept that start a process; the rest are in tests/unit/test_skips_scan.py (#41)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from device_matrix.skips import scan_source
from tests.conftest import clean_env
from tests.unit.test_skips_scan import NOT_TPU, PACKAGE, UPSTREAM


def test_a_file_that_does_not_parse_is_a_problem(tmp_path: Path) -> None:
    (entry,) = scan_source("def broken(:\n", "bad.py")
    assert entry.line == 1 and entry.problem is not None and entry.problem.startswith("cannot scan:")
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_bad.py").write_text("x = " + "-" * 200_000 + "1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(tmp_path), "skips", "check"],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "suites/test_bad.py: cannot scan: an expression is nested too deeply" in proc.stdout
    assert "TIP: fix or simplify the file" in proc.stdout
    assert "Traceback" not in proc.stderr


def _case_lines() -> dict[str, tuple[str, int]]:
    """Where each `# case: NAME` comment of the fixture project sits."""
    cases = {}
    for f in sorted((UPSTREAM / "test").rglob("*.py")):
        for number, line in enumerate(f.read_text().splitlines(), 1):
            if "# case: " in line:
                cases[line.rsplit("# case: ", 1)[1].strip()] = (str(f.relative_to(UPSTREAM)), number)
    return cases


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(UPSTREAM), "skips", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )


def test_skips_list_finds_every_form_of_the_upstream_project() -> None:
    proc = _cli("list", "test", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {(r["file"], r["line"]): r for r in json.loads(proc.stdout)}
    cases = _case_lines()
    expected = {
        # case: (form, devices, issue, by design)
        # a condition that leaves the test to one device, a reason that says it needs it:
        # where the test applies, by design (#24)
        "not-tpu": ("unittest.skipIf", list(NOT_TPU), None, True),
        "fstring-cuda": ("unittest.skipIf", ["cuda"], "acme/xla#12", False),
        "constant-neuron": ("unittest.skipIf", ["neuron"], "acme/xla#41", False),
        "needs-helper": ("unittest.skipUnless", list(NOT_TPU), None, True),
        "by-design-constant": ("unittest.skipIf", list(NOT_TPU), None, True),
        "everywhere-cited": ("unittest.skip", ["*"], "acme/xla#5", False),
        "by-design-comment": ("self.skipTest", list(NOT_TPU), None, True),
        "class": ("unittest.skipIf", ["tpu"], "acme/xla#77", False),
        "skiptest-cuda": ("self.skipTest", ["cuda"], "acme/xla#88", False),
        "mark-skipif": ("pytest.mark.skipif", ["cpu"], "acme/xla#63", False),
        "cuda-mark": ("pytest.mark.skipif", ["cpu", "neuron", "tpu"], None, True),
        "pytest-skip": ("pytest.skip", ["neuron", "tpu"], "acme/xla#64", False),
    }
    got = {
        case: (r["form"], r["devices"], r["issue"], r["by_design"])
        for case, where in cases.items()
        if (r := rows.get(where)) is not None
    }
    assert got == expected
    # and nothing else: the version check and the flag-driven skips are not device skips
    assert len(rows) == len(expected)
    assert rows[cases["class"]]["test"] == "test/test_operations.py::TestReductions"


def test_skips_check_flags_exactly_the_uncited_device_skips_of_the_upstream_project() -> None:
    # every uncited skip of the first fixture says where its test applies: nothing to fix
    proc = _cli("check", "test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "12 device skip(s)/xfail(s), 0 problem(s)" in proc.stdout
    # the second says of some that they are broken, or disables them everywhere
    check = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(PACKAGE), "skips", "check", "test"],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert check.returncode == 1, check.stdout + check.stderr
    lines = (PACKAGE / "test" / "test_device_skips.py").read_text().splitlines()
    broken = (
        "alias-comment",
        "helper-runtime",
        "absltest-neuron",
        "bare-skip",
        "cuda-reason",
        "cuda-plain",
        "everywhere",
        "always",
    )
    at = {name: n for n, line in enumerate(lines, 1) for name in broken if f"case: {name}" in line}
    flagged = [line.split(": ", 1)[0] for line in check.stdout.splitlines() if line.endswith("cites no issue")]
    assert flagged == [f"test/test_device_skips.py:{at[name]}" for name in broken]
    assert "19 device skip(s)/xfail(s), 8 problem(s)" in check.stdout
    assert "TIP:" in check.stdout and "only_on" in check.stdout and "device-matrix: by-design" in check.stdout


def _upstream_env(**extra: str) -> dict[str, str]:
    env = clean_env()
    env.update({"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1", **extra})
    return env


def test_the_upstream_project_runs_with_plain_pytest_from_its_folder() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=UPSTREAM,
        capture_output=True,
        text=True,
        env=_upstream_env(),
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "10 passed, 8 skipped" in proc.stdout
    assert "Skipping, not on TPU." in proc.stdout


def test_the_upstream_project_runs_its_files_as_scripts_with_flags() -> None:
    script = UPSTREAM / "test" / "spmd" / "test_train_spmd_linear.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--skip-gradient-checkpointing", "-v"],
        cwd=UPSTREAM,
        capture_output=True,
        text=True,
        env=_upstream_env(),
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_gradient_checkpointing" in proc.stderr
    assert "skipped '--skip-gradient-checkpointing given'" in proc.stderr
    assert "Ran 3 tests" in proc.stderr


def test_the_upstream_global_setup_can_break_a_shared_process() -> None:
    """The device started at import by one file, then SPMD asked for by another: with the
    strict switch on, the process dies as upstream's do when files share a process."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test/test_operations.py", "test/spmd"],
        cwd=UPSTREAM,
        capture_output=True,
        text=True,
        env=_upstream_env(XLA_SIM_SPMD_AFTER_DEVICE="abort"),
        check=False,
        timeout=120,
    )
    assert proc.returncode < 0 or proc.returncode == 134, proc.stdout + proc.stderr
    assert "use_spmd() after the runtime started" in proc.stderr
    alone = subprocess.run(
        [sys.executable, str(UPSTREAM / "test" / "spmd" / "test_train_spmd_linear.py")],
        cwd=UPSTREAM,
        capture_output=True,
        text=True,
        env=_upstream_env(XLA_SIM_SPMD_AFTER_DEVICE="abort"),
        check=False,
        timeout=60,
    )
    assert alone.returncode == 0, alone.stdout + alone.stderr


def test_every_form_upstream_writes_is_read_and_only_tests_are_listed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(PACKAGE), "skips", "list", "test", "--json"],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    file = "test/test_device_skips.py"
    lines = (PACKAGE / file).read_text().splitlines()
    case = {line.split("case: ", 1)[1].rstrip(")").strip(): n for n, line in enumerate(lines, 1) if "case: " in line}
    got = {
        name: (r["form"], r["devices"], r["issue"], r["by_design"], r["test"].split("::", 1)[1])
        for name, n in case.items()
        for r in rows
        if r["file"] == file and r["line"] == n
    }
    every = ["*"]
    expected = {
        # case: (form, devices, issue, by design, test)
        "or-version": ("unittest.skipIf", list(NOT_TPU), None, True, "TestDeviceSkips::test_or_version"),
        "not-tpu": ("unittest.skipIf", list(NOT_TPU), None, True, "TestDeviceSkips::test_not_tpu"),
        "alias": ("unittest.skipIf", ["tpu"], None, True, "TestDeviceSkips::test_alias"),
        "alias-comment": ("unittest.skipIf", ["neuron"], None, False, "TestDeviceSkips::test_alias_comment"),
        "sibling-helper": ("unittest.skipUnless", list(NOT_TPU), None, True, "TestDeviceSkips::test_sibling_helper"),
        "helper-runtime": ("unittest.skipIf", ["tpu"], None, False, "TestDeviceSkips::test_helper_runtime"),
        "absltest-neuron": ("unittest.skipIf", ["neuron"], None, False, "TestDeviceSkips::test_absltest_neuron"),
        "absltest-set": ("unittest.skipUnless", ["cpu", "cuda"], None, True, "TestDeviceSkips::test_absltest_set"),
        "bare-skip": ("unittest.skip", every, None, False, "TestDeviceSkips::test_bare_skip"),
        "xenv": ("unittest.skipIf", ["tpu"], None, True, "TestDeviceSkips::test_xenv"),
        "factory": ("unittest.skipIf", ["cuda", "neuron", "tpu"], None, True, "TestDeviceSkips::test_factory"),
        "local": ("self.skipTest", list(NOT_TPU), None, True, "TestDeviceSkips::test_local_device"),
        "owner-repo": ("unittest.skip", every, "pytorch/pytorch#91199", False, "TestDeviceSkips::test_owner_repo"),
        "cuda-reason": ("unittest.skipIf", ["cuda"], None, False, "TestDeviceSkips::test_cuda_reason"),
        "cuda-plain": ("unittest.skipIf", ["cuda"], None, False, "TestDeviceSkips::test_cuda_plain"),
        "everywhere": ("unittest.skip", every, None, False, "TestDeviceSkips::test_everywhere"),
        "always": ("unittest.skipIf", every, None, False, "TestDeviceSkips::test_always"),
        "absltest-raise": ("unittest.SkipTest", ["cpu", "cuda"], None, True, "TestDeviceSkips::test_absltest_raise"),
        "setup": ("self.skipTest", list(NOT_TPU), None, True, "TestSetUpSkips"),
    }
    assert got == expected
    # nothing else: not the aliases where they are defined, not the helpers of xla_test_base.py
    assert len(rows) == len(expected), [(r["file"], r["line"], r["test"]) for r in rows]
