"""Crash parsing and fingerprints, pinned exactly: what is read, what is left out, what is printed."""

from __future__ import annotations

from device_matrix.diagnostics.parse import (
    FaulthandlerDump,
    NativeStack,
    PyFrame,
    Terminate,
    ThreadStack,
    format_python_stack,
    is_idle,
    last_lines,
    parse_native_stacks,
    parse_terminate,
)


def _stack(*frames: tuple[str, str], current: bool = False) -> ThreadStack:
    return ThreadStack("0x1", current, [PyFrame(f, 1, fn) for f, fn in frames])


def test_a_thread_is_idle_by_its_top_frame_only() -> None:
    assert is_idle(ThreadStack("0x1", False, []))  # no Python frame: nothing to blame
    assert is_idle(_stack(("/usr/lib/python3.11/threading.py", "wait"), ("/app/train.py", "step")))
    assert not is_idle(_stack(("/app/train.py", "step"), ("/usr/lib/python3.11/threading.py", "wait")))
    # a Windows path and a bare file name are matched by their base name too
    assert is_idle(_stack(("C:\\Python311\\Lib\\threading.py", "wait")))
    assert is_idle(_stack(("queue.py", "get")))
    assert not is_idle(_stack(("queue.py", "put")))


def test_the_thread_to_blame_skips_idle_threads_and_prefers_the_current_one() -> None:
    idle = _stack(("threading.py", "wait"))
    busy = _stack(("train.py", "step"))
    current = _stack(("model.py", "forward"), current=True)
    assert FaulthandlerDump(threads=[idle, busy, current]).current is current
    assert FaulthandlerDump(threads=[idle, busy]).current is busy
    assert FaulthandlerDump(threads=[idle]).current is idle
    assert FaulthandlerDump().current is None


def test_a_python_stack_is_printed_as_faulthandler_prints_it() -> None:
    stack = ThreadStack("0x7f00", False, [PyFrame("/app/train.py", 12, "step"), PyFrame("/app/x.py", None, "<module>")])
    assert format_python_stack(stack) == (
        "Thread 0x7f00 (most recent call first):\n"
        '  File "/app/train.py", line 12 in step\n'
        '  File "/app/x.py", line ??? in <module>'
    )
    stack.current = True
    assert format_python_stack(stack).splitlines()[0] == "Current thread 0x7f00 (most recent call first):"


def test_an_exception_without_what_prints_its_type_alone() -> None:
    assert str(Terminate("std::bad_alloc", None)) == "std::bad_alloc"
    assert str(Terminate("std::runtime_error", "boom")) == "std::runtime_error: boom"
    assert str(Terminate("std::runtime_error", "")) == "std::runtime_error: "


def test_terminate_reads_what_only_from_the_next_two_lines() -> None:
    assert parse_terminate("all fine\n") is None
    head = "terminate called after throwing an instance of 'std::bad_alloc'"
    assert parse_terminate(head + "\n") == Terminate("std::bad_alloc", None)
    assert parse_terminate(f"{head}\nnoise\n  what():  late\n") == Terminate("std::bad_alloc", "late")
    # the third line after belongs to something else
    assert parse_terminate(f"{head}\nnoise\nmore\n  what():  other\n") == Terminate("std::bad_alloc", None)
    # the last exception is the one that ended the process
    two = f"{head}\n  what():  first\nterminate called after throwing an instance of 'E2'\n  what():  second\n"
    assert parse_terminate(two) == Terminate("E2", "second")


def test_last_lines_keep_indentation_and_drop_trailing_blank_lines() -> None:
    text = "".join(f"line {i}\n" for i in range(50)) + "  indented  \n\n   \n"
    out = last_lines(text)
    assert len(out) == 40
    assert out[0] == "line 11" and out[-1] == "  indented"
    assert last_lines("a\n\nb\n\n", count=3) == ["a", "", "b"]
    assert last_lines("\n\n") == []


def test_a_tsl_block_is_kept_as_printed_and_ends_where_it_ends() -> None:
    text = (
        "  *** Received signal 11 ***\n"
        "*** Reason: SEGV_MAPERR ***\n"
        "*** BEGIN MANGLED STACK TRACE ***\n"
        "/opt/lib/libfoo.so(_ZN3foo3barEv+0x24)[0x7f00]\n"
        "libbare.so(+0x10)[0x7f01]\n"
        "*** END MANGLED STACK TRACE ***\n"
        "*** Begin stack trace ***\n"
        "\tfoo::bar()\n"
        "\t\n"
        "*** End stack trace ***\n"
        "unrelated output\n"
    )
    # lines as a caller already split them: the signal line keeps its indentation
    (stack,) = parse_native_stacks(text.splitlines())
    assert stack == NativeStack(
        "tsl",
        11,
        None,
        ["foo::bar()"],
        [
            "  *** Received signal 11 ***",
            "*** Reason: SEGV_MAPERR ***",
            "*** BEGIN MANGLED STACK TRACE ***",
            "/opt/lib/libfoo.so(_ZN3foo3barEv+0x24)[0x7f00]",
            "libbare.so(+0x10)[0x7f01]",
            "*** END MANGLED STACK TRACE ***",
            "*** Begin stack trace ***",
            "\tfoo::bar()",
            "",
            "*** End stack trace ***",
        ],
    )
    # without the demangled block the mangled symbols are the frames; a frame without a
    # symbol is named by its module's base name, with or without a folder
    (mangled,) = parse_native_stacks(text.split("*** Begin stack trace ***", maxsplit=1)[0])
    assert mangled.frames == ["_ZN3foo3barEv", "(libbare.so)"]


def test_a_mangled_block_cut_short_still_makes_a_stack() -> None:
    text = (
        "*** Received signal 6 ***\n"
        "*** BEGIN MANGLED STACK TRACE ***\n"
        "/lib/libc.so.6(abort+0x10)[0x7f00]\n"
        "Fatal Python error: Aborted\n"
        "*** Received signal 11 ***\n"
    )
    stacks = parse_native_stacks(text)
    assert [(s.signal, s.frames) for s in stacks] == [(6, ["abort"]), (11, [])]
    assert stacks[0].raw == text.splitlines()[:3]


def test_back_to_back_tsl_blocks_are_two_stacks() -> None:
    block = "*** Received signal {} ***\n*** Begin stack trace ***\n\tf{}()\n*** End stack trace ***\n"
    stacks = parse_native_stacks(block.format(11, 1) + block.format(6, 2))
    assert [(s.signal, s.frames) for s in stacks] == [(11, ["f1()"]), (6, ["f2()"])]
    # an end right after the signal: an empty stack, and the parser moves on
    assert [
        (s.signal, s.frames) for s in parse_native_stacks("*** Received signal 4 ***\n*** End stack trace ***\n")
    ] == [(4, [])]


def test_the_demangled_block_right_after_the_mangled_one_wins() -> None:
    text = (
        "*** Received signal 11 ***\n"
        "*** BEGIN MANGLED STACK TRACE ***\n"
        "/lib/libfoo.so(_ZN3foo3barEv+0x24)[0x7f00]\n"
        "*** END MANGLED STACK TRACE ***\n"
        "*** Begin stack trace ***\n"
        "\tfoo::bar()\n"
        "*** End stack trace ***\n"
    )
    (stack,) = parse_native_stacks(text)
    assert stack.frames == ["foo::bar()"]
