"""Untrusted text in the GitHub Actions log is inert: no record, test or log starts a workflow command (#22)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.output import ZERO_WIDTH_SPACE, Output, inert
from tests import records as R


def _commands(text: str) -> list[str]:
    """The lines the Actions runner would run as workflow commands: it splits output at
    CR and LF, trims leading white space, and reads ``::name ...::`` (and the legacy
    ``##[name]`` anywhere in a line)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line.lstrip() for line in lines if line.lstrip().startswith("::") or "##[" in line]


def test_a_reason_holding_workflow_commands_is_printed_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Seen 5: results come from artifacts; this reason stopped the crash annotations after it
    reason = "row failed\n::warning title=fake::all green\n::stop-commands::abc123"
    rec = R.record(
        "cpu",
        [R.test("s/t.py::test_a", "crashed", crash_id="cpu-1")],
        [R.crash("cpu", "s/t.py::test_a", "f" * 16)],
        reason=reason,
    )
    (tmp_path / "results" / "cpu").mkdir(parents=True)
    (tmp_path / "results" / "cpu" / "run.json").write_text(json.dumps(rec))
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = main(["--project", str(tmp_path), "triage", str(tmp_path / "results"), "--no-history"])
    assert code == 0
    out = capsys.readouterr().out
    commands = _commands(out)
    assert not [c for c in commands if c.startswith(("::warning title=fake", "::stop-commands"))], commands
    # the text is still there for a reader, and the crash's own annotation came after it
    assert "warning title=fake" in out and "stop-commands" in out
    assert [c for c in commands if c.startswith("::error ")]
    assert {c.split("::")[1].split(" ")[0] for c in commands} == {"group", "endgroup", "error"}


# what the runner runs: the command forms of today's runner and the old ##[ form
COMMAND_FORMS = [
    "::warning title=fake::all green",
    "::error file=x.py,line=1::boom",
    "::notice::n",
    "::debug::d",
    "::group::g",
    "::endgroup::",
    "::add-mask::secret-value",
    "::set-output name=verdict::passed",
    "::save-state name=s::v",
    "::set-env name=PATH::/evil",
    "::add-path::/evil",
    "::echo::on",
    "::stop-commands::abc123",
    "::abc123::",
    "  ::warning::indented",
    "\t::warning::a tab",
    "\u3000::warning::an ideographic space",
    "\xa0::warning::a no-break space",
    "\x0b\x0c::warning::vertical tab and form feed",
    "##[add-mask]secret-value",
    "text before ##[set-output name=a;]b",
    "##[error]legacy",
]


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize("before", ["", "line one\n", "carriage\r", "crlf\r\n", "two\n\n"])
def test_no_command_form_survives_inert(form: str, before: str) -> None:
    text = before + form + "\ntrailing"
    shown = inert(text)
    assert _commands(shown) == []
    assert shown.replace(ZERO_WIDTH_SPACE, "") == text  # a reader sees what was said
    assert inert(shown) == shown


def test_text_without_a_command_is_printed_as_it_is() -> None:
    for text in ("a::b", "std::vector<int>", "x ::y", "#[ok]", "## [ok]", ""):
        assert inert(text) == text


def test_every_way_untrusted_text_reaches_the_actions_log_is_inert(capsys: pytest.CaptureFixture[str]) -> None:
    evil = "x\n::stop-commands::abc123\r::warning::fake\n##[add-mask]y"
    stream = io.StringIO()
    out = Output(stream, environ={"GITHUB_ACTIONS": "true"})
    with out.group(f"row: {evil}"):
        out.line(evil)
        out.note("row", evil)
        out.test_result("row", f"t.py::test[{evil}]", "failed", duration=0.1, done=1, total=2)
        out.crash("row", f"t.py::test[{evil}]", outcome="crashed", phase="test", what=evil, fingerprint="f" * 16)
        assert out.annotate("error", evil, title=evil, file=evil)
        out.command("notice", evil, title=evil)
    out.error(evil, tip=evil)
    assert out.untrusted(evil) == inert(evil)
    printed = stream.getvalue()
    names = [c.split("::")[1].split(" ")[0] for c in _commands(printed)]
    assert names == ["group", "error", "notice", "endgroup"]  # only its own
    assert _commands(capsys.readouterr().err) == []


def test_outside_actions_the_text_is_left_as_it_is() -> None:
    stream = io.StringIO()
    out = Output(stream, environ={})
    out.line("::warning::plain terminal")
    assert stream.getvalue() == "::warning::plain terminal\n"


def test_a_command_escapes_each_value_as_the_runner_reads_it() -> None:
    stream = io.StringIO()
    out = Output(stream, environ={"GITHUB_ACTIONS": "true"})
    out.command("error", "a\nb\r100%", title="t:1,2", file="f,1:x.py", line=3)
    out.command("notice", "plain")
    out.command("warning", "m", title="only")
    assert stream.getvalue().splitlines() == [
        "::error title=t%3A1%2C2,file=f%2C1%3Ax.py,line=3::a%0Ab%0D100%25",
        "::notice::plain",
        "::warning title=only::m",
    ]


def test_untrusted_text_is_free_text_unless_it_is_an_identifier() -> None:
    out = Output(io.StringIO(), environ={})
    assert out.untrusted("t.py::test[token=abc]", identifier=True) == "t.py::test[token=abc]"
    assert out.untrusted("t.py::test[token=abc]") == "t.py::test[token=[redacted]]"
    token = "ghp_" + "Q" * 36
    assert out.untrusted(token, identifier=True).startswith("[redacted:")


def test_the_traceback_of_an_internal_error_is_redacted_and_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import device_matrix.cli.triage as triage_cli

    token = "ghp_" + "Tr4cebackT0ken" * 3

    def broken(args: object, out: object) -> int:
        raise RuntimeError(f"a record said {token}\n::warning::fake")

    monkeypatch.setattr(triage_cli, "cmd_triage", broken)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    assert main(["--project", str(tmp_path), "triage", str(tmp_path)]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError" in err
    assert token not in err and _commands(err) == []
