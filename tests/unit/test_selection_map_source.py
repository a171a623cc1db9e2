"""Where ``run --select changed`` finds its test map (#34): the workflow's history steps.

The part of these tests that starts no process; the rest is in tests/integration/test_selection_map_source.py (#41)."""

from __future__ import annotations


def test_a_selecting_row_job_restores_its_base_s_history_and_the_whole_git_history() -> None:
    import yaml

    from tests.conftest import REPO

    jobs = yaml.safe_load((REPO / ".github" / "workflows" / "reusable.yml").read_text())["jobs"]
    for name in ("rows-host", "rows-container"):
        steps = jobs[name]["steps"]
        checkout = steps[0]
        assert checkout["uses"].startswith("actions/checkout@")
        assert "'--select'" in checkout["with"]["fetch-depth"] and "'0'" in checkout["with"]["fetch-depth"], name
        (restore,) = [s for s in steps if s.get("uses", "").startswith("actions/cache/restore@")]
        assert "--select" in restore["if"] and "github.base_ref" in restore["with"]["key"], name
        assert restore["with"]["path"] == ".device-matrix/history.sqlite"
        assert steps.index(restore) < [s.get("name") for s in steps].index("Run the row"), name
