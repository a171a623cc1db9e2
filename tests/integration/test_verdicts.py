"""The tests of this concept that start a process; the rest are in tests/unit/test_verdicts.py (#41)."""

from __future__ import annotations

import html as htmlmod
import json
import re
import subprocess
from pathlib import Path

from device_matrix.report import html
from tests.integration.test_triage import _screenshot, browser  # noqa: F401 - browser: the fixture
from tests.unit.test_triage import ARTIFACTS
from tests.unit.test_verdicts import VERDICT_PROBE, _triage, main_history

__all__ = ["main_history"]  # fixtures, used by name


def test_the_verdicts_and_the_commits_in_a_real_browser(
    browser: list[str],  # noqa: F811 - the fixture of test_triage, imported
    main_history: Path,
    tmp_path: Path,
) -> None:
    t = _triage(tmp_path, "pr-105", main_history, read_only=True)
    page = tmp_path / "probed.html"
    page.write_text(html.render(t).replace("</body>", VERDICT_PROBE))
    proc = subprocess.run(
        [*browser, "--window-size=1280,900", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    m = re.search(r"<pre id=\"probe\">(.*?)</pre>", proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    seen = json.loads(htmlmod.unescape(m.group(1)))
    v = t["verdicts"]
    assert v is not None
    assert seen["line"] == v["line"]
    assert [r["verdict"] for r in seen["rows"]] == [i["verdict"] for i in v["items"]]
    assert all(r["height"] > 0 for r in seen["rows"])
    assert seen["columns"] == 20 and seen["links"] and seen["broken"] == []
    plain = tmp_path / "triage.html"
    plain.write_text(html.render(t))
    _screenshot(browser, plain, ARTIFACTS / "verdicts.png", "1280,1600")  # for a reader of the CI's artifacts
