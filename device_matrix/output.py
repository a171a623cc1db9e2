"""One output object for the terminal, plain logs and GitHub Actions.

On a TTY: a live status line per row, rewritten in place. Elsewhere: plain lines. In
GitHub Actions: fold groups, ``::error``/``::warning`` annotations (capped: GitHub shows
at most 10 of each kind per step) and the step summary file.

Whatever a record, a test or a log said (a reason, a message, a skip reason, a nodeid,
crash text) goes through :meth:`Output.untrusted` before it is shown: redacted as a value
(an identifier keeps its identity, see device_matrix/redact.py) and, under GitHub Actions,
made :func:`inert`, so no such text ever runs as a workflow command (#22). Every line and
error this object prints takes that way; annotations and group titles are escaped as the
runner reads them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TextIO

from device_matrix.records.outcomes import COLOUR, QUIET_OUTCOMES
from device_matrix.redact import Redactor

ANNOTATION_CAP = 10


ZERO_WIDTH_SPACE = "\u200b"
_LINE_BREAK_RE = re.compile(r"(\r\n|\r|\n)")


def inert(text: str) -> str:
    """``text`` as the Actions log shows it and never runs it (#22).

    The runner reads its output line by line, a line ending at CR or LF, and runs a line
    that starts (after white space) with ``::`` as a workflow command (``::warning``,
    ``::add-mask::``, ``::set-output``, ``::stop-commands::TOKEN`` and the ``::TOKEN::``
    that resumes them), and the old form ``##[command]`` anywhere in a line. A zero-width
    space before such a line's ``::``, and inside every ``##[``, leaves what a reader sees
    and what the runner runs nothing of.
    """
    if "::" not in text and "##[" not in text:
        return text
    out = []
    for line in _LINE_BREAK_RE.split(text):
        body = line.lstrip()  # Python's white space includes all that .NET's TrimStart removes
        shown = line[: len(line) - len(body)] + ZERO_WIDTH_SPACE + body if body.startswith("::") else line
        out.append(shown.replace("##[", "##" + ZERO_WIDTH_SPACE + "["))
    return "".join(out)


# a character that ends a line (for str.splitlines or a terminal) or drives the terminal
_UNSHOWABLE_RE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """A value shown inside one line of ours (a title, a reason, a test's name), as its
    escapes where it holds a line break or a terminal's control character (#42): a tracker's
    title with a newline printed as two lines, one with ``ESC[2J`` cleared the screen."""
    return _UNSHOWABLE_RE.sub(lambda m: repr(m.group())[1:-1], text)


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
        self.stream.write(text)
        self.stream.flush()

    def untrusted(self, text: str, *, identifier: bool = False) -> str:
        """What a record, a test or a log said, as this output may show it (#22).

        Redacted as free text, or as an identifier (a nodeid keeps its identity), and under
        GitHub Actions :func:`inert`. Route every such text through here (a line, an
        annotation, a step summary's cell).
        """
        text = self._redactor.ident(text) if identifier else self._redactor.text(text)
        return inert(text) if self.github else text

    def _out(self, text: str) -> None:
        """A line of ours around values already passed through :meth:`untrusted`."""
        self._clear_status()
        self._write((inert(text) if self.github else text) + "\n")

    def paint(self, outcome: str, text: str | None = None) -> str:
        text = outcome if text is None else text
        code = COLOUR.get(outcome)
        if not self.color or code is None:
            return text
        return f"\x1b[{code}m{text}\x1b[0m"

    def _clear_status(self) -> None:
        if self._status_shown:
            self._write("\r\x1b[2K")
            self._status_shown = False

    def line(self, text: str = "") -> None:
        """A line of free text: it may hold what a record, a test or a log said."""
        self._out(self.untrusted(text))

    def status(self, text: str) -> None:
        """A transient progress line (TTY only): ours, around a nodeid."""
        if not self.tty:
            return
        width, head = 120, 40
        shown = self.untrusted(text, identifier=True)
        if len(shown) > width:
            # #29: cut in the middle: a nodeid's end (its test, a run's [variant]) tells two runs apart
            shown = shown[:head] + "..." + shown[head + 3 - width :]
        self._write("\r\x1b[2K" + shown)
        self._status_shown = True

    def test_result(
        self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None
    ) -> None:
        counter = f"[{done}/{total}]" if total else f"[{done}]"
        shown = self.untrusted(nodeid, identifier=True)
        if self.tty:
            if outcome not in QUIET_OUTCOMES or self.verbose:
                self._out(f"{row} {self.paint(outcome, outcome.upper())} {shown} ({duration:.2f}s)")
            self.status(f"{row} {counter} {nodeid}")
        else:
            self._out(f"{row} {counter} {outcome.upper()} {shown} ({duration:.2f}s)")

    # --- the run listener (device_matrix.run.runner.RunListener) -------------------

    def row_group(self, title: str) -> AbstractContextManager[None]:
        return self.group(title)

    def test_running(self, row: str, nodeid: str) -> None:
        self.status(f"{row} {nodeid}")

    def test_done(self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None) -> None:
        self.test_result(row, nodeid, outcome, duration=duration, done=done, total=total)

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None:
        label = self.paint(outcome, outcome.upper())
        shown = None if nodeid is None else self.untrusted(nodeid, identifier=True)
        where = shown if shown is not None and phase == "test" else f"during {phase}" + (f" ({shown})" if shown else "")
        self._out(f"{row} {label} {where}: {self.untrusted(what)} [fingerprint {fingerprint}]")

    def note(self, row: str, text: str) -> None:
        self.line(f"{row}: {text}")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self._clear_status()
        if self.github:  # the title is the command's data: a line break in it is escaped
            self._write(f"::group::{_escape_data(self._redactor.text(title))}\n")
        else:
            self.line(f"== {title}")
        try:
            yield
        finally:
            self._clear_status()
            if self.github:
                self._write("::endgroup::\n")

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
        self.command(level, message, title=title, file=file, line=line)
        return True

    def command(
        self, name: str, message: str, *, title: str | None = None, file: str | None = None, line: int | None = None
    ) -> None:
        """The workflow command ``::name props::message`` (the CI subcommands', printed anywhere):
        each value redacted, then escaped as the runner reads it, so nothing in it ends the
        command or starts another (#22)."""
        props = []
        if title:
            props.append(f"title={_escape_property(self._redactor.ident(title))}")
        if file:
            props.append(f"file={_escape_property(self._redactor.ident(file))}")
        if line:
            props.append(f"line={line}")
        head = f"::{name} {','.join(props)}::" if props else f"::{name}::"
        self._clear_status()
        self._write(head + _escape_data(self._redactor.text(message)) + "\n")

    def step_summary(self, markdown: str) -> bool:
        """Markdown built from redacted values (the triage's, or :meth:`untrusted`'s): no rule
        runs over Markdown, whose syntax it could break (#22)."""
        if self.summary_path is None:
            return False
        # a name that is not text (a lone surrogate from a file name) is written as its escape
        text = markdown if markdown.endswith("\n") else markdown + "\n"
        with self.summary_path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        return True

    def error(self, message: str, tip: str | None = None) -> None:
        self._clear_status()
        prefix = self.paint("failed", "ERROR") if self.color else "ERROR"
        sys.stderr.write(f"{prefix} {self.untrusted(message)}\n")
        if tip:
            sys.stderr.write(f"TIP   {self.untrusted(tip)}\n")
        sys.stderr.flush()
