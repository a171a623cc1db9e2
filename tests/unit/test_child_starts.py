"""Where a process starts (#31), read from the sources: a child that runs starts in
``base.spawn``; a tool asked on the host in ``devices.ask_tool``; a short question or
command whose end is waited for (git, the engine's ``info``, ``kill`` and ``rm``, gdb or pystack over
a core) in ``subprocess.run`` bounded by a timeout, stdin closed; ``ci install``'s pip in
the foreground. Every other way of starting a process (another ``Popen``, ``os.fork``,
``os.system``, ``multiprocessing``...) anywhere in the package fails here, as does a place
of this table that no longer starts one (the table stays the truth)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "device_matrix"

# every call that makes a process, by its module's own name for it
SUBPROCESS = frozenset({"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"})
OS = frozenset(
    {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"}
    | {f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    | {f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
)
# modules whose use is a process of its own (none of them is used by the package)
STARTING_MODULES = frozenset({"multiprocessing", "pty", "concurrent.futures.process"})

# (module, the function the call is in, the call) -> why it is there and not in base.spawn
PLACES = {
    ("executors/base.py", "spawn", "subprocess.Popen"): "the one spawn of every child that runs",
    ("devices.py", "ask_tool", "subprocess.Popen"): "a tool asked on this host: its own group, its answer read",
    ("records/source.py", "git", "subprocess.run"): "a question to git",
    ("executors/engine.py", "probe_engine", "subprocess.run"): "the engine's info",
    ("executors/container.py", "engine_command", "subprocess.run"): "the engine's kill and rm, by name",
    ("diagnostics/core.py", "gdb_backtrace", "subprocess.run"): "gdb reads a core",
    ("diagnostics/core.py", "pystack_core", "subprocess.run"): "pystack reads a core (#39)",
    ("cli/ci.py", "cmd_ci_install", "subprocess.run"): "pip in the foreground: its output and Ctrl-C are the user's",
    # no new child: the janitor (started by spawn) leaves its parent for init, and the
    # script launcher becomes the script
    ("spread/janitor.py", "main", "os.fork"): "the janitor leaves the Ray worker's tree",
    ("child/script.py", "main", "os.execve"): "the launcher becomes the script",
}
FOREGROUND = {("cli/ci.py", "cmd_ci_install", "subprocess.run")}  # its terminal is the user's


def _starts(path: Path) -> Iterator[tuple[str, str, ast.Call]]:
    """Each call in ``path`` that starts a process: (the function it is in, the call's name, the call)."""
    tree = ast.parse(path.read_text(), str(path))
    aliases = {"subprocess": "subprocess", "os": "os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name not in STARTING_MODULES, f"{path}: imports {alias.name}"
                if alias.name in aliases:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.module not in STARTING_MODULES, f"{path}: imports from {node.module}"
            names = {a.name for a in node.names}
            assert not (node.module == "subprocess" and names & SUBPROCESS), f"{path}: from subprocess import"
            assert not (node.module == "os" and names & OS), f"{path}: from os import"
            assert not (node.module == "asyncio" and {"create_subprocess_exec", "create_subprocess_shell"} & names)

    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, str, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            inside = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                owner, attr = child.func.value, child.func.attr
                if isinstance(owner, ast.Name) and owner.id in aliases:
                    module = aliases[owner.id]
                    if (module == "subprocess" and attr in SUBPROCESS) or (module == "os" and attr in OS):
                        yield inside, f"{module}.{attr}", child
                if attr.startswith("create_subprocess_"):
                    yield inside, attr, child
            yield from walk(child, inside)

    yield from walk(tree, "<module>")


def _all_starts() -> dict[tuple[str, str, str], list[ast.Call]]:
    found: dict[tuple[str, str, str], list[ast.Call]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for where, call, node in _starts(path):
            found.setdefault((str(path.relative_to(PACKAGE)), where, call), []).append(node)
    return found


def test_a_process_starts_only_where_the_table_says() -> None:
    found = _all_starts()
    elsewhere = [
        f"{m}:{nodes[0].lineno} {where}: {call}"
        for (m, where, call), nodes in found.items()
        if (m, where, call) not in PLACES
    ]
    assert elsewhere == [], f"a process started outside base.spawn and the places named here: {elsewhere}"
    # each place is there, once: the table is not a list of what used to be
    assert {key: len(nodes) for key, nodes in found.items()} == dict.fromkeys(PLACES, 1)


def test_only_base_spawn_and_ask_tool_hold_a_popen() -> None:
    # grep-level too: no other module of the package names ``Popen(`` at all (a call under
    # another name, a string handed to eval), and the executors start theirs through spawn
    places = {f"device_matrix/{m}" for m, _, call in PLACES if call == "subprocess.Popen"}
    assert places == {"device_matrix/executors/base.py", "device_matrix/devices.py"}
    popen = re.compile(r"\bPopen\(")
    starting = sorted(str(path.relative_to(REPO)) for path in PACKAGE.rglob("*.py") if popen.search(path.read_text()))
    assert [p for p in starting if p not in places] == []
    for name in ("local.py", "container.py"):
        text = (PACKAGE / "executors" / name).read_text()
        assert "spawn(" in text and not popen.search(text), name


def test_a_short_question_is_bounded_and_reads_nothing_from_the_terminal() -> None:
    for key, (node,) in _all_starts().items():
        if key[2] != "subprocess.run" or key in FOREGROUND:
            continue
        keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
        assert "timeout" in keywords, f"{key}: no timeout"
        assert keywords.get("stdin") == "subprocess.DEVNULL", f"{key}: stdin not closed"
        assert keywords.get("capture_output") == "True", f"{key}: its answer is not read back"


def test_the_children_that_run_start_in_spawn() -> None:
    # the tests' processes (local, container), the image check and the copy of a core's
    # files out of the image, a shard's runner on this host, the Ray task's janitor, compare's plain run
    users = {
        "executors/local.py": ("launch",),
        "executors/container.py": ("launch", "_probe", "_not_copied"),
        "spread/local.py": ("_start",),
        "spread/ray_node.py": ("_task_folder",),
        "cli/compare.py": ("_plain",),
    }
    for module, functions in users.items():
        tree = ast.parse((PACKAGE / module).read_text())
        defined = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        for name in functions:
            calls = {
                c.func.id for c in ast.walk(defined[name]) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            assert "spawn" in calls, f"{module}:{name} starts its child without base.spawn"


def test_the_check_finds_a_second_popen_and_a_fork(tmp_path: Path) -> None:
    # the check reads what it looks for: a start in any of its spellings is found
    source = tmp_path / "m.py"
    source.write_text(
        "import os\nimport subprocess as sp\n\n"
        "def f():\n    sp.Popen(['x'])\n    os.fork()\n    os.system('x')\n    sp.check_output(['y'])\n"
    )
    assert [(where, call) for where, call, _ in _starts(source)] == [
        ("f", "subprocess.Popen"),
        ("f", "os.fork"),
        ("f", "os.system"),
        ("f", "subprocess.check_output"),
    ]
