"""``run --select changed|all``: what a row's selection is given (#34), gathered here.

:mod:`device_matrix.selection` decides, purely; this module finds what it decides from:
the row's test map (:func:`find_map`), the files changed since the map's commit (and the
merge base with ``--base``) as git tells them (:func:`changed_files`), and the tests that
failed or were skipped lately on the base branch or in this pull request, from the history
(:func:`recent_tests`). Whatever cannot be found runs every test, and the record says why.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import contextlib
import functools
import posixpath
import re
import shlex
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from device_matrix import tomlfile
from device_matrix.changes import importgraph, namereads
from device_matrix.config import Config
from device_matrix.errors import ConfigError, DeviceMatrixError, ResultsError
from device_matrix.records import testmap
from device_matrix.records.outcomes import CODE, FAIL_CODES
from device_matrix.records.schema import SourceInfo
from device_matrix.records.source import base_lane, git, lane, lane_words
from device_matrix.records.testmap import TestMap
from device_matrix.report import misses
from device_matrix.report.history import DEFAULT_PATH, History
from device_matrix.selection import (
    CONFTEST,
    SECTIONED,
    Plan,
    Rules,
    Spans,
    bodies_only,
    changed_functions,
    fixtures_only,
    followed_by_reads,
    import_guard,
    is_test_file,
    plan,
    read_by,
    rules_of,
    runs_all_alone,
    touched_lines,
    unread_change,
)

# changed Python files read for what their change is (the rest run every test): a change of
# more is a big one, and runs every test
MAX_FOLLOWED = 200
# #34: a project of more Python files than this is not read for its import graph: a change
# to what runs at import then runs every test
MAX_GRAPH_FILES = 20_000
# the files pytest reads its addopts from, and the section of each
INI_SECTIONS = (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))
SKIP_CODES = frozenset({CODE["skipped"]})  # skipped (or disabled): its map holds little of what it runs


def _lanes(source: SourceInfo | None) -> list[str]:
    """The history lanes a run selects by: its base branch's, then its own."""
    return list(dict.fromkeys(x for x in (base_lane(source), lane(source)) if x is not None))


@contextlib.contextmanager
def read_history(path: Path) -> Iterator[tuple[History | None, str]]:
    """The history at ``path`` read-only, opened once for the map and the recent failures:
    (None, "") when there is none, (None, why every test runs) when it cannot be read."""
    if not path.is_file():
        yield None, ""
        return
    problems: list[str] = []
    try:
        store = History.open(path, problems.append, read_only=True)
    except DeviceMatrixError as exc:
        problems.append(exc.message)
    if problems:
        yield None, f"the history's recent failures are unknown: {problems[0]}"
        return
    try:
        yield store, ""
    finally:
        store.close()


def find_map(cfg: Config, row: str, source: SourceInfo | None, store: History | None) -> TestMap | None:
    """The row's newest test map: of those the history keeps for the base branch and for this
    run's own lane (CI: the full runs of pushes recorded them), and the one a local full run
    with ``--record-map`` left in ``results/<row>/``; None when there is none."""
    found: list[TestMap] = []
    path = cfg.results_dir / row / testmap.FILE_NAME
    if path.is_file():
        found.append(testmap.read(path))
    if store is not None:
        found.extend(m for m in (store.latest_map(row, name) for name in _lanes(source)) if m is not None)
    return max(found, key=lambda m: m.created, default=None)


def changed_files(root: Path, since: Sequence[str]) -> tuple[list[str] | None, str]:
    """The repository's files changed from each commit of ``since`` to the working tree
    (untracked ones too), relative to ``root``: those above the project's folder (a folder
    of the repository) as ``../shared/limits.json`` (#40: a test may read one); None and why
    when git cannot tell."""
    found: set[str] = set()
    shown, why = git(root, "rev-parse", "--show-prefix")
    if shown is None:
        return None, f"not a git checkout: {why}"
    prefix = shown.rstrip("\n")
    for commit in since:
        # -z: each name as it is (a name outside ASCII is not quoted); from the top: every folder's
        out, why = git(root, "diff", "--name-only", "-z", "--no-renames", commit, "--", ":/")
        if out is None:
            return None, f"git cannot diff from {commit[:12]}: {why}"
        found.update(_from_root(name, prefix) for name in out.split("\0") if name)
    out, why = git(root, "ls-files", "-z", "--others", "--exclude-standard", "--full-name", "--", ":/")
    if out is None:
        return None, f"git cannot list the untracked files: {why}"
    found.update(_from_root(name, prefix) for name in out.split("\0") if name)
    return sorted(found), ""


def _from_root(name: str, prefix: str) -> str:
    """A path git names from the top of the work tree, relative to the project's folder
    (``prefix``, git's ``--show-prefix`` of it: ``py/``)."""
    return name.removeprefix(prefix) if name.startswith(prefix) else posixpath.relpath(name, prefix or ".")


def merge_base(root: Path, ref: str) -> tuple[str | None, str]:
    out, why = git(root, "merge-base", ref, "HEAD")
    if out is None:
        return None, f"no merge base with {ref}: {why}"
    return out.strip(), ""


def recent_tests(store: History | None, source: SourceInfo | None, row: str) -> dict[str, str]:
    """The row's tests that failed, flaked or were skipped in the history's window of the
    base branch and of this run's own lane (a pull request's earlier runs), with why."""
    found: dict[str, str] = {}
    if store is None:
        return found
    for name in [x for x in _lanes(source) if x]:  # a named lane's
        where = lane_words(name)
        for (r, nodeid), (text, _) in store.base(name).series.items():
            if r != row or nodeid in found:
                continue
            if set(text) & FAIL_CODES:
                found[nodeid] = f"recently failing on {where}"
            elif set(text) & SKIP_CODES:
                found[nodeid] = f"recently skipped or disabled on {where}"
    return found


def _missing_too_often(store: History | None, source: SourceInfo | None, row: str, bound: float) -> str | None:
    """Why the row's selection is off (#40): the full runs of its base branch found it missed
    failing tests on more than ``bound`` of the pull requests they checked; None otherwise."""
    base = next((name for name in _lanes(source) if name.startswith("branch:")), None)
    if store is None or base is None:
        return None
    rate = store.miss_rate(row, base)
    if not rate["checked"] or rate["rate"] <= bound:
        return None
    return f"on {lane_words(base)}, {misses.rate_words(rate)}, above select_max_miss_rate ({bound:.0%})"


def plan_for(args: argparse.Namespace, cfg: Config, row: str, source: SourceInfo | None) -> Plan | None:
    """The row's selection plan for ``--select`` (None: not asked for)."""
    if args.select is None:
        return None
    if args.select == "all":
        return plan(None, [], row=row, rules=rules_of(cfg), force="--select all", mode="all")
    with read_history(cfg.project_root / DEFAULT_PATH) as (store, why):
        if why:  # its recent failures unknown: nothing is left out
            return plan(None, [], row=row, rules=rules_of(cfg), force=why)
        return _changed_plan(args, cfg, row, source, store)


def _changed_plan(
    args: argparse.Namespace, cfg: Config, row: str, source: SourceInfo | None, store: History | None
) -> Plan:
    rules, root = rules_of(cfg), cfg.project_root
    recent = recent_tests(store, source, row)
    missing = _missing_too_often(store, source, row, cfg.select_max_miss_rate)
    if missing is not None:
        return plan(None, [], row=row, rules=rules, force=missing)
    if args.map is not None:
        found: TestMap | None = testmap.read(args.map)  # named: a missing or damaged one is the user's to fix
    else:
        try:
            found = find_map(cfg, row, source, store)
        except ResultsError as exc:
            return plan(None, [], row=row, rules=rules, force=f"the test map is unreadable: {exc.message}")
    if found is None:
        return plan(None, [], row=row, rules=rules)
    if found.row != row:
        where = f"{args.map}" if args.map is not None else f"the newest test map of row {row!r}"
        said = f"{where} is the test map of row {found.row!r}, not of row {row!r}"
        if args.map is not None:
            raise ResultsError(said, tip=f"Name the map a full run of row {row!r} recorded, or leave --map out.")
        return plan(None, [], row=row, rules=rules, force=said)
    if found.commit is not None:
        out, why = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{found.commit}^{{commit}}")
        if out is None:
            # #40: a shallow clone lacks it: the change since it cannot be known
            said = f"git cannot diff from {found.commit[:12]}: the test map's commit is not a commit of this clone"
            return plan(found, [], row=row, rules=rules, force=f"{said} (fetch the history, e.g. fetch-depth: 0)")
    since: list[str] = [found.commit] if found.commit else []
    if args.base:
        commit, why = merge_base(root, args.base)
        if commit is None:
            return plan(found, [], row=row, rules=rules, force=why)
        since.append(commit)
    if not since:
        return plan(found, [], row=row, rules=rules, force="the test map names no commit and no --base was given")
    changed, why = changed_files(root, since)
    if changed is None:
        return plan(found, [], row=row, rules=rules, force=why)
    changed = within_folders(root, found, changed, since)
    return change_plan(root, found, changed, row=row, rules=rules, recent=recent)


def within_folders(root: Path, test_map: TestMap, changed: Sequence[str], since: Sequence[str]) -> list[str]:
    """#40: a changed path that is a folder in the checkout is a change to files under it: a
    submodule (git shows its new commit as one path), the files git shows changed in it since
    the commit it was at in each of ``since``; a link to a folder pointed elsewhere (or a
    submodule git cannot tell of), every file under it the map knows a test ran or read."""
    out = set(changed)
    for path in (p for p in changed if (root / p).is_dir()):
        inner = _submodule_changes(root, path, since)
        if inner is None:
            known = test_map.known() | test_map.read_at_import.union(*(test_map.reads or {}).values())
            out.update(f for f in known if f.startswith(f"{path}/") and not f.endswith("/"))
        else:
            out.update(f"{path}/{name}" for name in inner)
    return sorted(out)


def _submodule_changes(root: Path, path: str, since: Sequence[str]) -> list[str] | None:
    """The files changed in the submodule at ``path`` since the commit it was at in each of
    ``since`` (its working tree and untracked files too); None: not a submodule then, or git
    cannot tell."""
    found: set[str] = set()
    for commit in since:
        listed, _ = git(root, "ls-tree", commit, "--", path)
        mode, kind, at = [*(listed or "").split(), "", "", ""][:3]
        if (mode, kind) != ("160000", "commit"):
            return None
        out, _ = git(root / path, "diff", "--name-only", "-z", "--no-renames", at, "--")
        if out is None:
            return None
        found.update(name for name in out.split("\0") if name)
    untracked, _ = git(root / path, "ls-files", "-z", "--others", "--exclude-standard")
    if untracked is None:
        return None
    return sorted(found | {name for name in untracked.split("\0") if name})


def change_plan(
    root: Path | None,
    found: TestMap,
    changed: Sequence[str],
    *,
    row: str,
    rules: Rules,
    recent: dict[str, str] | None = None,
    now: datetime | None = None,
) -> Plan:
    """The plan of ``changed`` over ``found``, with what the checkout at ``root`` says of it:
    the function bodies changed, the import graph, the conftest.py files of fixtures (None:
    no checkout, a change to a source file runs what the map alone says). ``run --select
    changed`` and bench/selection.py's replay both select by it."""
    bodies = function_changes(root, found, changed) if root is not None and found.commit else {}
    conftests = conftests_changed(root, found, changed) if root is not None and found.commit else []
    unread = unread_changes(root, found, changed) if root is not None and found.commit else []
    present = present_files(root, found.commit, changed) if root is not None and found.commit else []
    graph = import_graph(root, changed) if root is not None else None
    kept: dict[str, dict[str, str]] = {}
    readers: dict[str, dict[str, str]] = {}
    unnamed: str | None = None
    if root is not None and found.commit:
        project = functools.cache(lambda: _parsed_at(root, found.commit or "", changed))
        kept, untold = kept_readers(root, found, bodies, graph, project)
        data_kept, unnamed = opened_kept(found, changed, rules, graph, project, unread=unread, present=present)
        kept.update(data_kept)
        bodies = {f: spans for f, spans in bodies.items() if f not in untold}
        readers = name_readers(root, found, changed, bodies, graph, project=project)
    # #40: a file that runs every test by a rule of its own (setup.py, the build; a module no
    # test of the map ran) says so, not that its import may write the process's state
    imported = [f for f in changed if not runs_all_alone(f, found, rules)]
    foreign = foreign_writes(root, found, imported, graph) if root is not None and found.commit else None
    foreign = foreign or unnamed
    return plan(
        found,
        changed,
        row=row,
        rules=rules,
        recent=recent,
        now=now,
        bodies=list(bodies),
        graph=graph,
        conftests=conftests,
        functions={f: spans for f, spans in bodies.items() if spans is not None},
        readers=readers,
        kept=kept,
        force=foreign,
        unread=unread,
        present=present,
    )


def foreign_writes(
    root: Path, test_map: TestMap, changed: Sequence[str], graph: importgraph.Graph | None = None
) -> str | None:
    """Why every test runs when a changed Python file writes, at import, into what is not its
    own (:func:`device_matrix.changes.namereads.foreign_write`) or may write the process's
    state, or imports anew a module of the project whose import does (#40: the module is
    unchanged, but its import now runs in the process); None when none does (#34)."""
    assert test_map.commit is not None
    internal = _internal(root)
    for path in [f for f in changed if f.endswith(".py")][:MAX_FOLLOWED]:
        old, new = _versions(root, test_map.commit, path)
        if old is None or new is None:
            continue  # not read: the file's other rules hold
        why = _writes_at_import(path, old, new, internal)
        if why is None and graph is not None:
            why = _imports_a_writer(root, graph, (path, old, new), commit=test_map.commit, internal=internal)
        elif why is None and _imports(old) != _imports(new):
            why = f"{path} changes what it imports, and the project's imports cannot be listed"
        if why is not None:
            return why
    return None


def _writes_at_import(path: str, old: str, new: str, internal: Callable[[str], bool]) -> str | None:
    write = namereads.foreign_write(old, new, internal)
    if write is not None:
        return (
            f"{path} writes into another module's state when it is imported ({write}): every test "
            "module is imported before the first test runs"
        )
    call = namereads.process_write(old, new, internal)
    if call is not None:
        return (
            f"{path} may write the process's state when it is imported ({call}): every test "
            "runs in the process that imported it"
        )
    return None


def _imports_a_writer(
    root: Path,
    graph: importgraph.Graph,
    change: tuple[str, str, str],
    *,
    commit: str,
    internal: Callable[[str], bool],
) -> str | None:
    """#40: why every test runs when ``path``'s change imports anew, no longer or at another
    time a module whose import writes what every test shares (the module unchanged: its
    whole import is what the change adds or takes away; one deleted since, as it was at the
    map's ``commit``). ``change``: the changed file, as it was and as it is."""
    path, old, new = change
    for module in sorted(importgraph.imports_changed(graph, path, old, new)):
        try:
            text: str | None = (root / module).read_text("utf-8")
        except FileNotFoundError:  # gone now: its import, as it was, no longer runs
            text = _versions(root, commit, module)[0]
        except (OSError, UnicodeDecodeError):
            text = None
        if text is None:
            return f"{path} changes whether or when it imports {module}, which cannot be read"
        why = _writes_at_import(module, "", text, internal)
        if why is not None:
            return f"{path} changes whether or when it imports {module}: {why}"
    return None


def _imports(text: str) -> list[str]:
    """The import statements of ``text`` (any that do not parse: the text itself)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [text]
    return [ast.dump(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _internal(root: Path) -> Callable[[str], bool]:
    """Whether a dotted module name may be one of the project's: its first part is the name of
    a folder or a Python file of the project, anywhere (which folder is on ``sys.path`` is not
    guessed); git's list of the files, or none when git cannot give it (#40)."""
    out, _ = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    names = {part.removesuffix(".py") for path in (out or "").split("\0") if path for part in path.split("/")}
    return lambda module: module.split(".", 1)[0] in names


def name_readers(
    root: Path,
    test_map: TestMap,
    changed: Sequence[str],
    bodies: Collection[str],
    graph: importgraph.Graph | None,
    *,
    project: Callable[[], namereads.Parsed | None] | None = None,
) -> dict[str, dict[str, str]]:
    """The changed source files whose change to what runs at import binds names the project's
    code can be followed reading, each with the tests that read them
    (:func:`device_matrix.changes.namereads.readers`); a file it cannot tell of is not here (#34).
    ``project``: the project's files at the map's commit, parsed (default: read here)."""
    assert test_map.commit is not None
    candidates = [
        f
        for f in changed
        if f.endswith(".py")
        and f not in bodies
        and f in test_map.known()
        and not is_test_file(f, test_map)
        and f.rsplit("/", 1)[-1] != CONFTEST
    ][:MAX_FOLLOWED]
    if not candidates or test_map.lines is None:
        return {}
    parsed = (project or (lambda: _parsed_at(root, test_map.commit or "", changed)))()
    if parsed is None:
        return {}
    tops = {p.removeprefix("src/").split("/", 1)[0].removesuffix(".py") for p in parsed.sources}
    words = _naming(root, test_map, changed)

    def internal(module: str) -> bool:
        return module.split(".", 1)[0] in tops

    found: dict[str, dict[str, str]] = {}
    for path in candidates:
        old = parsed.sources.get(path)
        try:
            new = (root / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if old is None:
            continue
        read = namereads.readers(
            path,
            old,
            new,
            parsed,
            test_map,
            is_test=lambda f: is_test_file(f, test_map),
            internal=internal,
            sees=_sees(graph),
            in_files=words,
        )
        if read is not None:
            found[path] = read
    return found


def _naming(root: Path, test_map: TestMap, changed: Collection[str]) -> Callable[[Collection[str]], dict[str, str]]:
    """#40: the tests that read a file whose text names one of the names given, each with why:
    a template's ``{cfg.TIMEOUT}``, a configuration's ``pkg.module:function`` are read by the
    code that formats or loads them, by a name no Python mentions; and a test that is a text
    file's doctests, whose examples name it. The files are read as they are now, once each;
    a folder listed is not read."""
    texts: dict[str, bytes] = {}

    def text(rel: str) -> bytes:
        if rel not in texts:
            try:
                texts[rel] = (root / rel).read_bytes() if rel not in changed else b""
            except OSError:
                texts[rel] = b""
        return texts[rel]

    def naming(names: Collection[str]) -> dict[str, str]:
        if not names:
            return {}
        word = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\b")
        found: dict[str, str] = {}
        # a text file of doctests (pytest's test*.txt, --doctest-glob): its examples are the
        # test's code, read by pytest at collection, outside every test
        own_files = {n.split("::", 1)[0] for n in test_map.tests}
        naming_examples = {f for f in own_files if not f.endswith(".py") and word.search(text(f))}
        for nodeid in sorted(test_map.tests):
            own = nodeid.split("::", 1)[0]
            if own in naming_examples:
                found[nodeid] = f"its examples in {own} name a name the change binds anew"
        if test_map.reads is None:
            return found
        files = {r for reads in test_map.reads.values() for r in reads if not r.endswith(("/", ".py"))}
        naming_files = {r for r in files if word.search(text(r))}
        for nodeid, reads in sorted(test_map.reads.items()):
            named = sorted(naming_files & reads)
            if named:
                found[nodeid] = f"it read {named[0]}, which names a name the change binds anew"
        return found

    return naming


def kept_readers(
    root: Path,
    test_map: TestMap,
    functions: Mapping[str, Spans | None],
    graph: importgraph.Graph | None,
    project: Callable[[], namereads.Parsed | None],
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Of the changed files narrowed to their functions (``functions``), the tests that may
    get what a changed function made without running it, each file's (#40:
    :func:`device_matrix.changes.namereads.keepers`, with what the file at ``root`` writes now); and
    the files where that cannot be told, whose change then counts as one to what runs at import."""
    found: dict[str, dict[str, str]] = {}
    untold: list[str] = []
    narrowed = {f: spans for f, spans in functions.items() if spans is not None}
    parsed = project() if narrowed else None
    for path, spans in narrowed.items():
        kept = None
        now = _text(root / path)
        if parsed is not None and path in parsed.sources and now:
            kept = namereads.keepers(
                path, spans, parsed, test_map, is_test=lambda f: is_test_file(f, test_map), sees=_sees(graph), now=now
            )
        if kept is None:
            untold.append(path)
        elif kept:
            found[path] = kept
    return found, untold


def opened_kept(
    test_map: TestMap,
    changed: Sequence[str],
    rules: Rules,
    graph: importgraph.Graph | None,
    project: Callable[[], namereads.Parsed | None],
    *,
    unread: Collection[str] = (),
    present: Collection[str] = (),
) -> tuple[dict[str, dict[str, str]], str | None]:
    """#40: a data file's change is a change to the code that opened it: of the changed files
    the tests opened, the tests that may get what an opener kept without opening the file
    themselves (:func:`device_matrix.changes.namereads.keepers`: a wide fixture, a cache, a memo);
    and why every test runs when an opener cannot be named (None: each one was). The
    configuration files of ``unread`` are followed so too; a listing of the folder of one of
    ``present`` (there at the map's commit and now) saw no change, nor did its code."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(followed_by_reads(changed, rules, test_map, unread, present)):
        listed = path not in present
        recorded = {
            o for rel, names in (test_map.openers or {}).items() if read_by(path, {rel}, listed=listed) for o in names
        }
        # #40: a program a test started may have opened it: who started it is an opener too
        by = sorted(recorded | (test_map.starters if test_map.unseen else set()))
        if test_map.openers is None and any(
            read_by(path, rels, listed=listed) for rels in (test_map.reads or {}).values()
        ):
            return {}, f"{path} changes, and the test map does not know which code opened it (record it again)"
        spans, unnamed = _opener_spans(by, project)
        if unnamed is not None:
            said = f"code at {unnamed}" if unnamed else "code the recording could not name"
            if not unnamed and "" not in recorded:
                test, why = min(test_map.unseen.items())
                who = test or "the project's code outside every test"
                return {}, (
                    f"{path} changes, which a program {who} started may have opened ({why}): "
                    "who started it the recording could not name, so what it kept of it cannot be followed"
                )
            return {}, f"{path} changes, opened by {said}: what it kept of it cannot be followed"
        parsed = project()
        for source, lines in sorted(spans.items()):
            assert parsed is not None  # a span was found in it
            kept = namereads.keepers(
                source, lines, parsed, test_map, is_test=lambda f: is_test_file(f, test_map), sees=_sees(graph)
            )
            if kept is None:
                return {}, f"{path} changes, opened by code of {source}: what it kept of it cannot be followed"
            for nodeid in kept:
                found.setdefault(path, {})[nodeid] = f"it may get what {source} kept of {path} without opening it"
    return found, None


def _opener_spans(
    openers: Sequence[str], project: Callable[[], namereads.Parsed | None]
) -> tuple[dict[str, list[tuple[int, int]]], str | None]:
    """The body lines of each opener ("path:first line"), by file; and the first opener that
    names no function found (None: each one did)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for opener in openers:
        path, _, first = opener.rpartition(":")
        parsed = project() if path and first.isdigit() else None
        span = namereads.opener_span(parsed, path, int(first)) if parsed is not None else None
        if span is None:
            return {}, opener
        spans.setdefault(path, []).append(span)
    return spans, None


def _sees(graph: importgraph.Graph | None) -> Callable[[str, str], bool]:
    """Whether a file may read a name bound in another, by the import graph (#34)."""
    reach: dict[str, frozenset[str]] = {}

    def sees(reader: str, origin: str) -> bool:
        if reader == origin or graph is None or graph.everywhere is not None or reader in graph.unknown:
            return True
        if origin.rsplit("/", 1)[-1] == CONFTEST:  # its fixtures are its folder's, by name
            folder = origin.rpartition("/")[0]
            return not folder or reader.startswith(f"{folder}/")
        if origin in graph.plugins:  # a plugin's fixtures are every test's
            return True
        if origin not in reach:
            reach[origin] = graph.importers(origin)
        return reader in reach[origin]

    return sees


def _parsed_at(root: Path, commit: str, changed: Sequence[str]) -> namereads.Parsed | None:
    sources = _sources_at(root, commit, changed)
    return namereads.Parsed(sources) if sources is not None else None


def _sources_at(root: Path, commit: str, changed: Sequence[str]) -> dict[str, str] | None:
    """Every Python file of the project as it was at ``commit``: the files unchanged since
    read from the checkout, the changed ones from git; None when git cannot list them."""
    out, _ = git(root, "ls-tree", "-r", "-z", "--name-only", commit)
    if out is None:
        return None
    paths = [p for p in out.split("\0") if p.endswith(".py")]
    if len(paths) > MAX_GRAPH_FILES:
        return None
    moved = set(changed)
    sources: dict[str, str] = {}
    for path in paths:
        if path in moved:
            text, _ = git(root, "show", f"{commit}:./{path}")
        else:
            try:
                text = (root / path).read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                text = None
        if text is None:
            return None  # a file the map's lines are of cannot be read: what reads a name is unknown
        sources[path] = text
    return sources


def _text(path: Path) -> str | None:
    """A file's text now; None where it cannot be read (gone, not UTF-8)."""
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _versions(root: Path, commit: str, path: str) -> tuple[str | None, str | None]:
    """A changed file at ``commit`` and now: ``""`` where it was not there or is gone, None
    where git or the checkout cannot give it."""
    listed, _ = git(root, "ls-tree", "--name-only", commit, "--", path)
    old, _ = git(root, "show", f"{commit}:./{path}") if listed else (listed, "")  # None: git could not list it
    try:
        return old, (root / path).read_text("utf-8")
    except FileNotFoundError:
        return old, ""
    except (OSError, UnicodeDecodeError):
        return old, None


def present_files(root: Path, commit: str, changed: Sequence[str]) -> list[str]:
    """#40: the changed files that were there at the map's ``commit`` and are in the checkout
    now, of the same kind (a file, or a link): a change to what they hold, which a listing of
    their folder's names does not see (a file added, removed or renamed, one turned into a
    link or back, one past :data:`MAX_FOLLOWED`, or any when git cannot list them, is not one
    of them: its folder's listing changed, or may have)."""
    asked = list(changed)[:MAX_FOLLOWED]
    if not asked:
        return []
    out, _ = git(root, "ls-tree", "-z", commit, "--", *asked)
    there: list[str] = []
    for entry in (out or "").split("\0"):
        meta, _, path = entry.partition("\t")
        mode = meta.split(" ", 1)[0]
        if path in asked and (root / path).is_file() and (mode == LINK_MODE) == (root / path).is_symlink():
            there.append(path)
    return sorted(there)


LINK_MODE = "120000"  # git's mode of a symbolic link


def conftests_changed(root: Path, test_map: TestMap, changed: Sequence[str]) -> list[str]:
    """The changed conftest.py files that held fixtures alone at the map's commit (or were not
    there) and hold fixtures alone now (or are gone), none of whose changed functions writes
    what outlives its tests (:func:`device_matrix.changes.namereads.fixture_write`): each runs
    the tests under its folder (:func:`device_matrix.selection.fixtures_only`); one git cannot
    show is not one of them."""
    assert test_map.commit is not None
    found: list[str] = []
    internal: Callable[[str], bool] | None = None  # git's list of the files, asked once a conftest needs it
    for path in [f for f in changed if f.rsplit("/", 1)[-1] == CONFTEST][:MAX_FOLLOWED]:
        old, new = _versions(root, test_map.commit, path)  # deleted: its folder's tests lose its fixtures
        if old is None or new is None or not all(not text or fixtures_only(text) for text in (old, new)):
            continue
        internal = internal or _internal(root)
        if namereads.fixture_write(old, new, internal) is None:  # #40: one that writes is every test's
            found.append(path)
    return found


def unread_changes(root: Path, test_map: TestMap, changed: Sequence[str]) -> list[str]:
    """The changed pyproject.toml, setup.cfg and tox.ini files whose change from the map's
    commit is in the tables of tools run apart from the tests alone (#40:
    :func:`device_matrix.selection.unread_change`): each runs only the tests that opened it."""
    assert test_map.commit is not None
    found: list[str] = []
    for path in [f for f in changed if f.rsplit("/", 1)[-1] in SECTIONED][:MAX_FOLLOWED]:
        old, new = _versions(root, test_map.commit, path)
        if unread_change(path, old, new, test_map.tests):
            found.append(path)
    return found


def import_graph(root: Path, changed: Sequence[str]) -> importgraph.Graph | None:
    """The import graph of the project's Python files as they are now (those git tracks or
    does not ignore, and the ``changed`` ones deleted since, which their importers still
    name), with the pytest plugins the project names; None when git cannot list them."""
    out, _ = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if out is None:
        return None
    paths = sorted({p for p in out.split("\0") if p.endswith(".py")} | {p for p in changed if p.endswith(".py")})
    if len(paths) > MAX_GRAPH_FILES:
        return None
    sources: dict[str, str | bytes | None] = {}
    unreadable: dict[str, str] = {}
    for path in paths:
        try:
            sources[path] = (root / path).read_bytes()
        except FileNotFoundError:
            sources[path] = None  # deleted
        except OSError as exc:
            unreadable[path] = exc.strerror or type(exc).__name__
    return importgraph.build(sources, plugins=plugins_of(root), unreadable=unreadable)


def plugins_of(root: Path) -> dict[str, str]:
    """The pytest plugins the project loads for every test: its own pytest11 entry points and
    the ``-p`` of its addopts (pyproject.toml, pytest.ini, tox.ini, setup.cfg) -> where."""
    found: dict[str, str] = {}
    pyproject = root / "pyproject.toml"
    try:
        data = tomlfile.read(pyproject) if pyproject.is_file() else {}
    except ConfigError:
        data = {}  # the run's configuration, read from it too, has said what is wrong
    points = data.get("project", {}).get("entry-points", {}).get("pytest11", {})
    for value in points.values() if isinstance(points, dict) else ():
        if isinstance(value, str):
            found[value.split(":", 1)[0].strip()] = "pyproject.toml's pytest11 entry point"
    addopts = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("addopts", "")
    _dash_p(addopts if isinstance(addopts, list) else str(addopts), "pyproject.toml", found)
    for name, section in INI_SECTIONS:
        ini = configparser.ConfigParser(interpolation=None)
        try:
            ini.read(root / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if ini.has_option(section, "addopts"):
            _dash_p(ini.get(section, "addopts"), name, found)
    return found


def _dash_p(addopts: str | list[str], where: str, found: dict[str, str]) -> None:
    try:
        words = addopts if isinstance(addopts, list) else shlex.split(addopts)
    except ValueError:
        return
    words = [str(w) for w in words]
    for before, word in zip(["", *words], words, strict=False):
        if before == "-p":
            name = word
        elif word.startswith("-p") and word != "-p":
            name = word.removeprefix("-p")  # -pNAME
        else:
            continue
        if not name.startswith("no:"):
            found.setdefault(name, f"-p in {where}'s addopts")


def bodies_changed(root: Path, test_map: TestMap, changed: Sequence[str]) -> list[str]:
    """The changed Python files (tests aside) whose change from the map's commit is in
    function bodies only that never ran at import (:func:`device_matrix.selection.bodies_only`);
    a file git cannot show or diff is not one of them (every test runs)."""
    return list(function_changes(root, test_map, changed))


def function_changes(root: Path, test_map: TestMap, changed: Sequence[str]) -> dict[str, Spans | None]:
    """:func:`bodies_changed`'s files, each with the line spans (at the map's commit) of the
    functions its change is in (:func:`device_matrix.selection.changed_functions`; None: not
    told by function, the file's tests run) (#34)."""
    assert test_map.commit is not None
    found: dict[str, Spans | None] = {}
    candidates = [f for f in changed if f.endswith(".py") and f in test_map.known()]
    for path in candidates[:MAX_FOLLOWED]:
        old, _ = git(root, "show", f"{test_map.commit}:./{path}")
        diff, _ = git(root, "diff", "-U0", "--no-color", "--no-ext-diff", test_map.commit, "--", path)
        try:
            new: str | None = (root / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            new = None
        if diff is None:
            continue
        if bodies_only(old, new, import_guard(old, diff), test_map.imports.get(path, frozenset())):
            found[path] = changed_functions(old, new, touched_lines(diff))
    return found
