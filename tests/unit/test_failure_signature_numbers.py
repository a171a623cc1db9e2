"""#42 Seen 6 and 7: a number is masked by its role in the message, not because it is a number.

A number that says what happened (an exit status, a signal, an HTTP status code, an errno)
is the cause: a child that exited 1, one killed (137) and one that crashed (245) are three
failures. A number inside a name (``float16``, ``bfloat16``, ``int8``, ``sm_80``) is part of
the name: ``float16`` and ``float64`` are two dtypes. What differs between two runs of one
failure (a port, a count, a line, a device's ordinal) is still masked.
"""

from __future__ import annotations

from device_matrix.report.groups import failure_signature
from device_matrix.report.signature import mask


def _exit(status: int) -> str:
    return f"subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status {status}."


def test_exit_statuses_1_137_and_245_are_three_groups() -> None:
    signatures = {failure_signature(_exit(n), "tests/test_run.py:9") for n in (1, 137, 245)}
    assert len(signatures) == 3, signatures
    assert "exit status 137" in mask(_exit(137))


def test_a_number_that_says_what_happened_is_kept() -> None:
    kept = {
        "FileNotFoundError: [Errno 2] No such file or directory: 'x.bin'": "[Errno 2]",
        "PermissionError: [Errno 13] Permission denied: 'x.bin'": "[Errno 13]",
        "OSError: errno=28 while writing": "errno=28",
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://h/x": "404 Client Error",
        "urllib.error.HTTPError: HTTP Error 503: Service Unavailable": "HTTP Error 503",
        "huggingface_hub.errors.HfHubHTTPError: status code 429 from the hub": "status code 429",
        "RuntimeError: worker exited with code 3": "exited with code 3",
        "RuntimeError: child failed, returncode=2": "returncode=2",
        "RuntimeError: process 4711 was killed by signal 9": "signal 9",
        "CalledProcessError: Command 'x' died with <Signals.SIGKILL: 9>.": "SIGKILL: 9",
        "AssertionError: assert 1 == 0 (exit code -11)": "exit code -11",
    }
    for message, part in kept.items():
        assert part in mask(message), (message, mask(message))
    assert mask("[Errno 2] No such file") != mask("[Errno 13] No such file")
    assert mask("HTTP Error 404: x") != mask("HTTP Error 500: x")
    # what varies between runs of one failure, in the same messages, is still masked
    assert mask("RuntimeError: process 4711 was killed by signal 9") == "RuntimeError: process N was killed by signal 9"
    assert (
        mask("404 Client Error: Not Found for url: https://h:8080/x")
        == "404 Client Error: Not Found for url: https://h:N/x"
    )


def test_a_type_name_is_not_a_number() -> None:
    def sig(dtype: str) -> str:
        return failure_signature(f"RuntimeError: expected dtype {dtype} but got dtype int32 at step 71", "pkg/ops.py:4")

    assert len({sig(d) for d in ("float16", "float64", "bfloat16", "int8", "float8_e4m3fn")}) == 5
    assert "dtype float16" in sig("float16") and "step N" in sig("float16")
    assert mask("kernel built for sm_80, device is sm_90") == "kernel built for sm_80, device is sm_90"
    assert mask("no kernel image for sm_80") != mask("no kernel image for sm_90")
    assert (
        mask("x of shape torch.Size([3, 4]) in conv2d of layer3") == "x of shape torch.Size([N, N]) in conv2d of layer3"
    )


def test_a_device_ordinal_is_masked() -> None:
    one = "RuntimeError: Expected all tensors to be on the same device, but found cuda:1 and cpu!"
    two = one.replace("cuda:1", "cuda:0")
    assert mask(one) == mask(two) and "cuda:N" in mask(one)
    assert mask("xla:0 is busy") == mask("xla:3 is busy") == "xla:N is busy"


def test_a_base_failure_recorded_before_numbers_were_kept_is_still_the_same_failure() -> None:
    # the history stores each failure's masked signature; one written before #42 masked every
    # number: the same failure on main must stay "broken on base", not turn "new" at the upgrade
    from device_matrix.report.history import signature
    from tests.unit.test_verdicts import _base, _judge_one

    message = _exit(137)
    old = signature("failed", message).replace("137", "N")  # as a history written before #42 holds it
    for stored in (old, signature("failed", message)):
        base = _base({("cpu", "t::a"): ("PPPPPPFF", stored)}, runs=8)
        item = _judge_one(base, outcome="failed", sig=signature("failed", message), fingerprint=None)
        assert item["verdict"] == "broken-on-base", (stored, item["evidence"])
    # and two failures the new rule tells apart stay apart against a new history
    other = _judge_one(
        _base({("cpu", "t::a"): ("PPPPPPFF", signature("failed", _exit(1)))}, runs=8),
        outcome="failed",
        sig=signature("failed", message),
        fingerprint=None,
    )
    assert other["verdict"] == "new"
