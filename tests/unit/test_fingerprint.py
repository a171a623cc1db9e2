"""What a crash's fingerprint is made of, pinned exactly: which frames and words, in which order, and its hash."""

from __future__ import annotations

import hashlib

from device_matrix.diagnostics import fingerprint as fp


def test_native_frames_lose_addresses_offsets_templates_arguments_and_folders() -> None:
    assert (
        fp.normalize_native("xla::Foo<int, std::vector<int>>::Run[abi:cxx11](int, char) const+0x1f [0x7f00]")
        == "xla::Foo<>::Run() const []"
    )
    assert fp.normalize_native("f(a(b)c)(d) g<h<i>>j") == "f()() g<>j"
    # a closing bracket without its opening one is text
    assert fp.normalize_native("operator> x)") == "operator> x)"
    assert fp.normalize_native("/usr/lib/x86_64/libfoo.so   bar+12") == "libfoo.so bar"
    assert fp.normalize_native("") == ""


def test_python_frames_keep_the_file_base_name() -> None:
    assert fp.normalize_python("/srv/p/suites/test_a.py", "test_x") == "test_a.py:test_x"
    assert fp.normalize_python("C:\\p\\suites\\test_a.py", "test_x") == "test_a.py:test_x"
    assert fp.normalize_python("test_a.py", "f") == "test_a.py:f"


def test_messages_lose_paths_addresses_and_numbers() -> None:
    assert (
        fp.normalize_message("/home/u/x/file.cc:12 failed  at 0xDEADbeef\nwith 42 items")
        == "file.cc:N failed at <hex> with N items"
    )
    assert fp.normalize_message("./build/out.txt (../a/b.txt)") == "out.txt (b.txt)"
    assert len(fp.normalize_message("word " * 100)) == 200


def test_the_handler_and_the_interpreter_are_not_part_of_a_crash() -> None:
    frames = [
        "tsl::CurrentStackTrace[abi:cxx11]()",
        "raise (libc.so.6)",
        "raise () from /lib/x86_64-linux-gnu/libc.so.6",
        "abort",
        "",
        "foo::bar()",
        "_PyEval_EvalFrameDefault",
        "baz(int)",
    ]
    assert fp.significant_native(frames) == ["foo::bar()", "baz()"]


def _digest(basis: list[str]) -> str:
    return hashlib.sha256("\n".join(basis).encode()).hexdigest()[:16]


def test_the_fingerprint_is_the_hash_of_its_basis() -> None:
    digest, basis = fp.compute("SIGSEGV", native_frames=["abort", "f()"])
    assert basis == ["SIGSEGV", "f()"] and digest == _digest(basis)
    assert fp.compute("SIGSEGV", native_frames=["g()"])[0] != digest


def test_the_head_is_the_signal_else_the_exit_code_else_unknown() -> None:
    assert fp.compute("SIGABRT", exit_code=3)[1][0] == "SIGABRT"
    assert fp.compute(None, exit_code=3)[1] == ["exit 3", fp.NOTHING_PRINTED]
    assert fp.compute(None, exit_code=0)[1][0] == "exit 0"
    assert fp.compute(None)[1][0] == "unknown"


def test_every_kind_of_native_evidence_in_order_and_only_five_frames() -> None:
    _, basis = fp.compute(
        "SIGABRT",
        fatal_message="Check failed: x == 1 at /p/a.cc",
        exception=("std::runtime_error", "bad 7"),
        native_frames=[f"f{i}()" for i in range(7)],
        python_frames=[("t.py", "test_x")],
    )
    assert basis == [
        "SIGABRT",
        "Check failed: x == N at a.cc",
        "throw std::runtime_error",
        "what bad N",
        "f0()",
        "f1()",
        "f2()",
        "f3()",
        "f4()",
    ]
    # an exception without what(): its type alone
    assert fp.compute("SIGABRT", exception=("E", None))[1] == ["SIGABRT", "throw E"]
    assert fp.compute("SIGABRT", exception=("E", ""))[1] == ["SIGABRT", "throw E"]


def test_python_frames_only_without_native_evidence_and_without_pytest() -> None:
    frames = [
        ("/v/lib/_pytest/python.py", "pytest_pyfunc_call"),
        ("/p/t.py", "helper"),
        ("/p/t.py", "test_x"),
        ("/v/lib/pluggy/_callers.py", "_multicall"),
    ] + [(f"/p/m{i}.py", "f") for i in range(5)]
    assert fp.compute("SIGSEGV", python_frames=frames)[1] == [
        "SIGSEGV",
        "t.py:helper",
        "t.py:test_x",
        "m0.py:f",
        "m1.py:f",
        "m2.py:f",
    ]
    # nothing but the runner's own frames: those, rather than nothing
    only = [("/v/lib/_pytest/python.py", "a"), ("<frozen runpy>", "b")]
    assert fp.compute("SIGSEGV", python_frames=only)[1] == ["SIGSEGV", "python.py:a", "<frozen runpy>:b"]
    assert fp.compute("SIGSEGV", fatal_message="boom", python_frames=frames)[1] == ["SIGSEGV", "boom"]


def test_the_frames_of_whatever_ran_the_test_are_left_out() -> None:
    # #39 item 7: pytest-forked before 1.7 runs each test in py's ForkedFunc, a unittest
    # script in unittest's runner and absltest's: the same under every test, so not the crash
    helper = [("/usr/lib/python3.11/ctypes/__init__.py", "string_at"), ("/p/t.py", "helper"), ("/p/t.py", "test_x")]
    runners = [
        ("/v/lib/python3.11/site-packages/_pytest/runner.py", "runtestprotocol"),
        ("/v/lib/python3.11/site-packages/py/_process/forkedfunc.py", "_child"),
        ("/v/lib/python3.11/site-packages/py/_process/forkedfunc.py", "__init__"),
        ("/v/lib/python3.11/site-packages/pytest_forked/__init__.py", "forked_run_report"),
        ("/usr/lib/python3.11/unittest/case.py", "_callTestMethod"),
        ("/v/lib/python3.11/site-packages/absl/testing/absltest.py", "run_tests"),
        ("/v/lib/python3.11/site-packages/absl/app.py", "_run_main"),
    ]
    assert fp.compute("SIGSEGV", python_frames=helper + runners)[1] == [
        "SIGSEGV",
        "__init__.py:string_at",
        "t.py:helper",
        "t.py:test_x",
    ]


def test_a_crash_is_the_same_when_the_evidence_both_attempts_have_agrees() -> None:
    # #39: a rerun that could not have the Python stack (no core, no pystack) saw less, not
    # another crash; evidence both have must agree, and the head always
    helper = ["SIGSEGV", "t.py:helper", "t.py:test_x"]
    assert fp.same_crash(helper, list(helper))
    assert fp.same_crash(helper, ["SIGSEGV", fp.NO_FRAMES])
    assert fp.same_crash(["SIGSEGV", fp.NOTHING_PRINTED], helper)
    assert fp.same_crash(["SIGSEGV", fp.NO_FRAMES], ["SIGSEGV", fp.NOTHING_PRINTED])
    assert not fp.same_crash(helper, ["SIGABRT", fp.NO_FRAMES])
    assert not fp.same_crash(helper, ["SIGSEGV", "t.py:other", "t.py:test_x"])
    assert not fp.same_crash(helper, ["SIGSEGV", "t.py:helper"])
    assert not fp.same_crash(helper, [])


# --- #42: what varies from run to run is masked, a digit of a name is not -----------------------

ONE = (
    "ops.cc] Check failed: no kernel for sm_80 in frame_1 (pid 4242, at 0x7f3a2b1c, 2026-11-02 10:00:01.123, "
    "/tmp/pytest-of-u/pytest-3/test_a0/x7.bin, run 3f2a9c1e-0b1d-4c2e-9f3a-1b2c3d4e5f60, cache deadbeef12)"
)
TWO = (
    "ops.cc] Check failed: no kernel for sm_80 in frame_1 (pid 977, at 0x55d0c0ffee, 2026-12-24 23:59:59.999, "
    "/tmp/pytest-of-ci/pytest-118/test_a3/x12.bin, run 0b1d3f2a-9c1e-4c2e-9f3a-60b2c3d4e5f1, cache 0123abcd99)"
)


def test_two_runs_of_one_crash_share_a_fingerprint_and_a_digit_of_a_name_tells_two_apart() -> None:
    def digest(message: str) -> str:
        return fp.compute("SIGABRT", fatal_message=message)[0]

    assert digest(ONE) == digest(TWO)  # another pid, address, time, temp folder, id and hash
    for same, other in (("sm_80", "sm_90"), ("frame_1", "frame_2"), ("sm_80", "float16")):
        assert digest(ONE) != digest(ONE.replace(same, other)), (same, other)
    what = fp.compute("SIGABRT", exception=("std::runtime_error", "no kernel image for sm_80"))[1]
    assert what[-1] == "what no kernel image for sm_80"
    assert fp.compute("SIGABRT", exception=("std::runtime_error", "no kernel image for sm_90"))[1] != what


def test_the_former_fingerprint_is_the_one_that_masked_every_digit() -> None:
    # issues filed before a name's digits were kept carry that fingerprint: the sync finds them by it
    evidence: fp.Evidence = {"fatal_message": "ops.cc] no kernel for sm_80", "native_frames": ["xla::Run7()"]}
    former = hashlib.sha256(b"SIGABRT\nops.cc] no kernel for sm_N\nxla::Run7()").hexdigest()[:16]
    assert fp.former_fingerprint("SIGABRT", evidence) == former != fp.compute("SIGABRT", **evidence)[0]
    # no digit of a name in its messages: the fingerprint is what it was
    assert fp.former_fingerprint("SIGABRT", {"fatal_message": "ops.cc] failed at 12"}) is None
    assert fp.former_fingerprint("SIGSEGV", {"native_frames": ["frame_1()"]}) is None
