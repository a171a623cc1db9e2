"""#29 (9): the record's environment keeps what pytorch/xla's run_tests.sh exports for every file."""

from __future__ import annotations

from device_matrix.diagnostics.environment import ENV_RE


def test_the_variables_run_tests_sh_exports_are_kept() -> None:
    for name in ("PYTORCH_TEST_WITH_SLOW", "TORCH_TEST_DEVICES", "XLA_DUMP_FATAL_STACK", "CPU_NUM_DEVICES"):
        assert ENV_RE.match(name), name
