"""#33 in the reusable workflow: row jobs read the disables; schedules run the re-enable check."""

from __future__ import annotations

from tests.unit.test_workflow import jobs, steps


def test_the_row_jobs_read_the_disables_with_a_read_only_token() -> None:
    for name in ("rows-host", "rows-container"):
        job = jobs()[name]
        assert job["permissions"] == {"contents": "read", "issues": "read"}
        (run,) = [s for s in steps(job) if s.get("name") == "Run the row"]
        assert run["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
        assert run["env"]["DEVICE_MATRIX_TRACKER"] == "${{ inputs.tracker }}"


def test_a_schedule_runs_the_reenable_check_on_each_rows_runner_and_the_issues_job_reports_it() -> None:
    for name in ("rows-host", "rows-container"):
        (check,) = [s for s in steps(jobs()[name]) if s.get("name") == "Re-enable check (schedules only)"]
        assert "github.event_name == 'schedule'" in check["if"]
        assert "github.event.repository" not in check["if"]  # a schedule's payload has none
        assert "--rerun-disabled" in check["run"]
        (upload,) = [s for s in steps(jobs()[name]) if s.get("name") == "Upload the re-enable check's evidence"]
        assert upload["with"]["path"] == "reruns-${{ matrix.row }}/disabled-reruns.json"
    issues = steps(jobs()["issues"])
    (download,) = [s for s in issues if s.get("with", {}).get("pattern") == "reruns-*"]
    assert download["if"] == "github.event_name == 'schedule'"
    (sync,) = [s for s in issues if s.get("name") == "File or link issues"]
    assert sync["run"].index("cp -R reruns/. results/") < sync["run"].index("issues sync results")
