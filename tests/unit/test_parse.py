"""How crash output is read, pinned exactly: Python stacks, native stacks, fatal lines, what is left out."""

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
    parse_fatal_lines,
    parse_faulthandler,
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


def test_faulthandler_dumps_threads_and_frames_exactly() -> None:
    text = (
        "Timeout (0:00:05.5)!\n"
        "Thread 0x0002 [loader] (most recent call first):\n"
        '  File "/usr/lib/threading.py", line 320 in wait\n'
        "  <an indented line faulthandler did not write>\n"
        "\n"
        "  <no Python frame>\n"
        '  File "/app/x.py", line ??? in  run \n'
        "Fatal Python error: Segmentation fault  \n"
        '  File "/app/orphan.py", line 1 in lost\n'
        "Current thread 0x0001 (most recent call first):\n"
        '  File "/app/t.py", line 12 in test_x\n'
        "not a frame: the dump ended\n"
        '  File "/app/after.py", line 2 in ignored\n'
        "Thread 0x0003 (most recent call first):\n"
        '  File "/app/w.py", line 3 in work\n'
    )
    assert parse_faulthandler(text) == [
        FaulthandlerDump(
            timeout="0:00:05.5",
            threads=[
                ThreadStack(
                    "0x0002", False, [PyFrame("/usr/lib/threading.py", 320, "wait"), PyFrame("/app/x.py", None, "run")]
                )
            ],
        ),
        FaulthandlerDump(
            fatal_error="Segmentation fault",
            threads=[
                ThreadStack("0x0001", True, [PyFrame("/app/t.py", 12, "test_x")]),
                ThreadStack("0x0003", False, [PyFrame("/app/w.py", 3, "work")]),
            ],
        ),
    ]


def test_a_dump_without_a_header_starts_at_its_first_thread() -> None:
    text = 'noise\nThread 0x9 (most recent call first):\n  File "a.py", line 1 in f\n'
    only = ThreadStack("0x9", False, [PyFrame("a.py", 1, "f")])
    assert parse_faulthandler(text) == [FaulthandlerDump(threads=[only])]
    assert parse_faulthandler("Fatal Python error: Aborted\n") == [FaulthandlerDump(fatal_error="Aborted")]
    # a second "Current thread" right after one: another dump (dump_traceback via a signal)
    head = "Current thread 0x1 (most recent call first):\n"
    twice = parse_faulthandler(f'{head}  File "a.py", line 1 in f\n{head}  File "b.py", line 2 in g\n')
    assert [[f.function for t in d.threads for f in t.frames] for d in twice] == [["f"], ["g"]]


def test_an_absl_block_reads_frames_through_its_notes_and_one_blank_line() -> None:
    lines = [
        "*** SIGSEGV (@0x0), see go/stacktraces#s15 received by PID 2231 (TID 2388) on cpu 17; stack trace: ***",
        "PC: @     0x7f98b808cb51  (unknown)  tpu::Lookup()",
        "    @     0x7f96c2d8a1e0        976  (unknown)  ",
        "",
        "    @     0x7f98b808405a        144  xla::Compile()",
        "https://symbolize.stripped_domain/r/?trace=7f98b808cb51",
        "E1102 08:12:44.243922    2231 coredump_hook.cc:292] RAW: Remote crash data gathering hook invoked.",
        "",
        "Fatal Python error: Segmentation fault",
    ]
    (stack,) = parse_native_stacks("\n".join(lines) + "\n")
    assert stack == NativeStack(
        "absl",
        None,
        "SIGSEGV",
        ["tpu::Lookup()", "(unknown)", "xla::Compile()"],
        [*lines[:2], lines[2].rstrip(), *lines[3:8]],
    )


def test_a_check_failure_trace_ends_at_the_first_other_line() -> None:
    text = (
        "*** Check failure stack trace: ***\n"
        "    @     0x7f00  xla::Check()\n"
        "    @     0x7f01  main\n"
        "Aborted (core dumped)\n"
        "    @     0x7f02  not_mine\n"
    )
    (stack,) = parse_native_stacks(text)
    assert (stack.format, stack.signal, stack.signal_name) == ("check_failure", None, None)
    assert stack.frames == ["xla::Check()", "main"]
    assert stack.raw == text.splitlines()[:3]


def test_fatal_lines_of_both_shapes() -> None:
    text = (
        "F0531 07:47:31.003927 10044 pjrt_client.cc:741] Check failed: ok  \n"
        "  2026-11-29 19:00:02.050050: F external/xla/xla/service/x.cpp:127] Bad things\n"
        "I0531 07:47:31.003927 10044 info.cc:1] not fatal\n"
    )
    (a, b) = parse_fatal_lines(text)
    assert (a.file, a.line, a.message, a.raw) == (
        "pjrt_client.cc",
        741,
        "Check failed: ok",
        "F0531 07:47:31.003927 10044 pjrt_client.cc:741] Check failed: ok",
    )
    assert (b.file, b.line, b.message) == ("external/xla/xla/service/x.cpp", 127, "Bad things")
    assert b.raw == "2026-11-29 19:00:02.050050: F external/xla/xla/service/x.cpp:127] Bad things"


def test_blocks_that_end_with_the_text() -> None:
    # a frame line before any dump belongs to no thread
    assert parse_faulthandler('  File "a.py", line 1 in f\n\nplain\n') == []
    # a TSL signal line followed by ordinary output: a stack with no frames
    assert parse_native_stacks("*** Received signal 11 ***\nplain text\n") == [
        NativeStack("tsl", 11, None, [], ["*** Received signal 11 ***"])
    ]
    # an absl block whose last line is blank
    head = "*** SIGABRT received by PID 1 (TID 1) on cpu 0; stack trace: ***"
    (stack,) = parse_native_stacks([head, "    @ 0x7f00  f()", ""])
    assert stack.frames == ["f()"] and stack.raw == [head, "    @ 0x7f00  f()", ""]
    # a blank line ends the block unless frames follow it, whatever note comes next
    (stack,) = parse_native_stacks([head, "    @ 0x7f00  f()", "", "E0101 RAW: a later note"])
    assert stack.raw == [head, "    @ 0x7f00  f()", ""]
