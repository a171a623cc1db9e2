"""One output object for the terminal, plain logs and GitHub Actions.

On a TTY: a live status line per row, rewritten in place. Elsewhere: plain lines. In
GitHub Actions: fold groups, ``::error``/``::warning`` annotations (capped: GitHub shows
at most 10 of each kind per step) and the step summary file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TextIO

from device_matrix.redact import Redactor

ANNOTATION_CAP = 10

_COLORS = {
    "passed": "32",
    "failed": "31",
    "error": "31",
    "crashed": "35;1",
    "timeout": "35",
    "skipped": "33",
    "xfailed": "33",
    "xpassed": "31",
    "not_run": "90",
    "unavailable": "90",
}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Output:
    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        tty: bool | None = None,
        verbose: bool = False,
    ) -> None:
        self.stream = stream or sys.stdout
        env = os.environ if environ is None else environ
        self.github = env.get("GITHUB_ACTIONS") == "true"
        self.tty = (self.stream.isatty() if tty is None else tty) and not self.github
        # NO_COLOR (https://no-color.org) when non-empty turns colour off; any non-empty
        # FORCE_COLOR, "0" included, turns it on, as it does in pytest and most tools
        self.color = not env.get("NO_COLOR") and (bool(env.get("FORCE_COLOR")) or self.tty)
        self.verbose = verbose
        self.summary_path = Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None
        self._annotations: dict[str, int] = {}
        self._redactor = Redactor(env)
        self._status_shown = False

    def _write(self, text: str) -> None:
        # a CI log is a file too: nothing secret is printed (a nodeid, a reason, a repro)
        self.stream.write(self._redactor.text(text))
        self.stream.flush()

    def paint(self, outcome: str, text: str | None = None) -> str:
        text = outcome if text is None else text
        code = _COLORS.get(outcome)
        if not self.color or code is None:
            return text
        return f"\x1b[{code}m{text}\x1b[0m"

    def _clear_status(self) -> None:
        if self._status_shown:
            self._write("\r\x1b[2K")
            self._status_shown = False

    def line(self, text: str = "") -> None:
        self._clear_status()
        self._write(text + "\n")

    def status(self, text: str) -> None:
        """A transient progress line (TTY only)."""
        if not self.tty:
            return
        width = 120
        self._write("\r\x1b[2K" + text[:width])
        self._status_shown = True

    def test_result(
        self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None
    ) -> None:
        counter = f"[{done}/{total}]" if total else f"[{done}]"
        if self.tty:
            if outcome not in ("passed", "skipped", "xfailed") or self.verbose:
                self.line(f"{row} {self.paint(outcome, outcome.upper())} {nodeid} ({duration:.2f}s)")
            self.status(f"{row} {counter} {nodeid}")
        else:
            self.line(f"{row} {counter} {outcome.upper()} {nodeid} ({duration:.2f}s)")

    # --- the run listener (device_matrix.run.runner.RunListener) -------------------

    def row_group(self, title: str) -> AbstractContextManager[None]:
        return self.group(title)

    def test_running(self, row: str, nodeid: str) -> None:
        self.status(f"{row} {nodeid}")

    def test_done(self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None) -> None:
        self.test_result(row, nodeid, outcome, duration=duration, done=done, total=total)

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None:
        label = self.paint(outcome, outcome.upper())
        where = (
            nodeid if nodeid is not None and phase == "test" else f"during {phase}" + (f" ({nodeid})" if nodeid else "")
        )
        self.line(f"{row} {label} {where}: {what} [fingerprint {fingerprint}]")

    def note(self, row: str, text: str) -> None:
        self.line(f"{row}: {text}")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        if self.github:
            self.line(f"::group::{title}")
        else:
            self.line(f"== {title}")
        try:
            yield
        finally:
            self._clear_status()
            if self.github:
                self.line("::endgroup::")

    def annotate(
        self,
        level: str,
        message: str,
        *,
        title: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> bool:
        """A GitHub annotation (``error``/``warning``/``notice``); False once the cap is hit."""
        if not self.github:
            return False
        used = self._annotations.get(level, 0)
        if used >= ANNOTATION_CAP:
            return False
        self._annotations[level] = used + 1
        props = []
        if title:
            props.append(f"title={_escape_property(title)}")
        if file:
            props.append(f"file={_escape_property(file)}")
        if line:
            props.append(f"line={line}")
        head = f"::{level} {','.join(props)}::" if props else f"::{level}::"
        self.line(head + _escape_data(message))
        return True

    def step_summary(self, markdown: str) -> bool:
        if self.summary_path is None:
            return False
        # a page the run publishes: redacted as the log is, and a name that is not text
        # (a lone surrogate from a file name) written as its escape, never an error
        text = self._redactor.text(markdown if markdown.endswith("\n") else markdown + "\n")
        with self.summary_path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        return True

    def error(self, message: str, tip: str | None = None) -> None:
        self._clear_status()
        prefix = self.paint("failed", "ERROR") if self.color else "ERROR"
        sys.stderr.write(f"{prefix} {message}\n")
        if tip:
            sys.stderr.write(f"TIP   {tip}\n")
        sys.stderr.flush()
