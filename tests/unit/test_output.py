"""The run log: redacted before it is written, with exact per-test offsets."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from device_matrix.output import Output
from device_matrix.redact import Redactor
from device_matrix.run.pump import OutputPump
from device_matrix.wire import marker

TOKEN = "ghp_" + "L3akedT0kenValue" * 3


def test_pump_strips_markers_and_records_offsets(tmp_path: Path) -> None:
    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, Redactor({}))
    pump.begin()
    os.write(w, b"collected 2 items\nsuite.py ")
    os.write(w, marker(1))
    os.write(w, b".first test output\n")
    # a marker split across two reads
    os.write(w, b"\x1edm:")
    os.write(w, b"2\x1fsecond " + f"password={TOKEN}".encode() + b"\n")
    os.close(w)
    pump.finish()
    text = log.read_bytes()
    assert b"\x1e" not in text and b"\x1f" not in text
    assert text[pump.offsets[1] :].startswith(b".first test output")
    assert text[pump.offsets[2] :].startswith(b"second password=[redacted]")
    assert TOKEN.encode() not in text


def _pump_through(tmp_path: Path, chunks: list[bytes], **kwargs: object) -> tuple[OutputPump, Path]:
    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, Redactor({"HF_TOKEN": "hf_" + "s3cretvalue" * 4}), **kwargs)  # type: ignore[arg-type]
    pump.begin()
    for chunk in chunks:
        os.write(w, chunk)
    os.close(w)
    pump.finish()
    return pump, log


def test_a_secret_across_the_long_line_split_is_redacted(tmp_path: Path) -> None:
    # a 2 MiB line with no newline, the secret straddling the 1 MiB mark
    secret = ("hf_" + "s3cretvalue" * 4).encode()
    line = b"x" * ((1 << 20) - 20) + secret + b"y" * (1 << 20) + b"\n"
    _, log = _pump_through(tmp_path, [line[i : i + 65536] for i in range(0, len(line), 65536)])
    text = log.read_bytes()
    assert secret not in text
    assert secret[:20] not in text and secret[-20:] not in text  # no half left either
    assert b"[redacted]" in text


def test_output_over_the_cap_is_cut_with_a_note_and_its_tail_kept(tmp_path: Path) -> None:
    lines = [b"line %06d\n" % i for i in range(20000)]
    pump, log = _pump_through(tmp_path, lines, max_bytes=10000)
    text = log.read_bytes()
    assert text.startswith(b"line 000000\n")
    assert b"output over the 10000 byte cap" in text
    assert text.rstrip().endswith(b"line 019999")  # the end, where a crash speaks, is kept
    assert pump.cut > 0 and len(text) < 300_000


def test_a_log_that_cannot_be_written_never_blocks_the_child(tmp_path: Path) -> None:
    r, w = os.pipe()
    log = tmp_path / "log"
    log.symlink_to("/dev/full")  # every write fails with ENOSPC
    pump = OutputPump(r, log, Redactor({}))
    pump.begin()
    for _ in range(64):  # 4 MiB: far more than a pipe holds, so a stopped reader would block here
        os.write(w, b"z" * 65535 + b"\n")
    os.close(w)
    pump.finish()
    assert pump.error is not None and pump.error.errno == 28


def test_a_stray_marker_start_in_the_output_is_output(tmp_path: Path) -> None:
    # b"\x1edm:" not followed by digits can never become a marker: what follows it is
    # written as it comes, not held back (holding it made every later read rescan it all)
    import time

    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, Redactor({}))
    pump.begin()
    os.write(w, b"binary \x1edm: blob\n")
    for _ in range(256):
        os.write(w, b"z" * 1023 + b"\n")
    deadline = time.monotonic() + 10
    while log.stat().st_size < 256 * 1024 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.stat().st_size >= 256 * 1024  # written while the writer is still open
    os.close(w)
    pump.finish()
    text = log.read_bytes()
    assert text.startswith(b"binary \x1edm: blob\n") and text.count(b"\n") == 257
    assert pump.offsets == {}


def test_the_step_summary_is_written_from_redacted_values_and_takes_any_name(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    secret = "hf_" + "s3cretvalue" * 4
    out = Output(
        io.StringIO(), environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "HF_TOKEN": secret}
    )
    assert out.step_summary(f"| test_caf\udce9.py | {out.untrusted(secret)} |")
    # no rule runs over the Markdown itself (#22): a table whose cell reads like key=value stays a table
    assert out.step_summary("| token=abc|ok |\n")
    text = summary.read_text("utf-8")
    assert text == "| test_caf\\udce9.py | [redacted] |\n| token=abc|ok |\n"


def _pump_slowly(tmp_path: Path, chunks: list[bytes], redactor: Redactor, **kwargs: object) -> Path:
    """Each chunk its own read: written, then a pause before the next."""
    import time

    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, redactor, **kwargs)  # type: ignore[arg-type]
    pump.begin()
    for chunk in chunks:
        os.write(w, chunk)
        time.sleep(0.15)
    os.close(w)
    pump.finish()
    return log


def test_a_secret_written_in_two_halves_is_redacted_whole(tmp_path: Path) -> None:
    secret = "opaque-halves-value-77"
    log = _pump_slowly(
        tmp_path, [b"before " + secret[:9].encode(), secret[9:].encode() + b" after\n"], Redactor({"A_TOKEN": secret})
    )
    assert log.read_bytes() == b"before [redacted] after\n"


def test_a_secret_across_the_long_line_cut_waits_for_its_end(tmp_path: Path) -> None:
    from device_matrix.run.pump import MAX_LINE

    secret = ("hf_" + "s3cretvalue" * 4).encode()
    first = b"x" * (MAX_LINE - 5) + secret[:12]  # the cut would fall inside the token, whose rest is to come
    log = _pump_slowly(tmp_path, [first, secret[12:] + b"y" * 10_000 + b"\n"], Redactor({"HF_TOKEN": secret.decode()}))
    text = log.read_bytes()
    assert text == b"x" * (MAX_LINE - 5) + b"[redacted]" + b"y" * 10_000 + b"\n"


def test_a_private_key_written_in_two_reads_is_redacted_whole(tmp_path: Path) -> None:
    body = b"MIIEowIBAAKCAQEAvQ3key\nAAKCAQEAs3cond-line\n"
    chunks = [
        b"log\n-----BEGIN RSA PRIVATE KEY-----\n" + body[:24],
        body[24:] + b"-----END RSA PRIVATE KEY-----\nafter\n",
    ]
    text = _pump_slowly(tmp_path, chunks, Redactor({})).read_bytes()
    assert b"MIIE" not in text and b"s3cond" not in text
    assert text == b"log\n-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----\nafter\n"


def test_a_childs_output_waits_until_it_named_its_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    import device_matrix.redact as redact

    monkeypatch.setattr(redact, "_REMEMBERED", set())
    learned = threading.Event()
    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, Redactor({}), hold=learned)
    pump.begin()
    os.write(w, b"conftest printed container-only-secret-1\n")
    time.sleep(0.2)
    assert log.read_bytes() == b""  # held: the child has not said what its secrets are
    redact.remember_values(["container-only-secret-1"])  # what the journal's first event names
    learned.set()
    os.write(w, b"then container-only-secret-1 again\n")
    os.close(w)
    pump.finish()
    assert log.read_bytes() == b"conftest printed [redacted]\nthen [redacted] again\n"
