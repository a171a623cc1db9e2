"""Mutation testing of the modules whose mistakes make the record lie (`nox -s mutation`).

Each module runs in its own copy of the tree (build/mutation/<module>/) with mutmut,
against only the fast unit tests the noxfile maps to it, so one module takes minutes.
A mutant no test kills is a survivor; one that cannot change behaviour is listed with a
reason in tests/mutation/equivalent.toml, and the score leaves it out:

    score = killed / (mutants - equivalent)

"killed" counts mutants a test failed on, timed out on or crashed on. "no tests" (code
no mapped test runs) counts as survived. The session fails when a module's score is
under its threshold, or when an equivalent entry matches no mutant or a killed one (the
list must stay true as the code changes).

    python tools/mutation.py --plan PLAN.json [--changed BASE] [--again] [--list] [MODULE...]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the session runs on 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "mutation"
KILLED = {"killed", "timeout", "segfault", "caught by type check"}


@dataclass
class Module:
    path: str  # device_matrix/x/y.py
    tests: list[str]
    threshold: float
    functions: list[str] = field(default_factory=list)  # `name` or `Class.method`; empty: all
    narrowed: bool = False  # to what a change touched (--changed): a function may have no mutant

    @property
    def slug(self) -> str:
        return self.path.removeprefix("device_matrix/").removesuffix(".py").replace("/", "-")

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


@dataclass(frozen=True)
class Equivalent:
    module: str
    function: str
    line: str
    mutated: str
    reason: str


@dataclass
class Mutant:
    name: str
    function: str
    status: str
    removed: str = ""
    added: str = ""
    reason: str = ""  # set when it matched an equivalent entry


@dataclass
class Result:
    module: Module
    mutants: list[Mutant]
    seconds: float
    errors: list[str]

    @property
    def killed(self) -> int:
        return sum(1 for m in self.mutants if m.status in KILLED)

    @property
    def equivalent(self) -> int:
        return sum(1 for m in self.mutants if m.reason)

    @property
    def survived(self) -> list[Mutant]:
        return [m for m in self.mutants if m.status not in KILLED and not m.reason]

    @property
    def score(self) -> float:
        counted = len(self.mutants) - self.equivalent
        return 100.0 * self.killed / counted if counted else 0.0

    @property
    def ok(self) -> bool:
        if not self.mutants:  # none at all is a wrong configuration, unless a change touched only such
            return self.module.narrowed and not self.errors
        return not self.errors and self.score >= self.module.threshold


def function_of(name: str, dotted: str) -> str:
    """`device_matrix.redact.xǁRedactorǁspans__mutmut_3` -> `Redactor.spans`."""
    key = name.removeprefix(dotted + ".").rsplit("__mutmut_", 1)[0]
    if key.startswith("xǁ"):
        _, cls, fn = key.split("ǁ")
        return f"{cls}.{fn}"
    return key.removeprefix("x_")


def split_diff(diff: str) -> tuple[str, str]:
    """The removed and the added lines of a mutant's diff, each stripped, one per line."""
    removed, added = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            removed.append(line[1:].strip())
        elif line.startswith("+"):
            added.append(line[1:].strip())
    return "\n".join(removed), "\n".join(added)


def load_equivalents(path: Path) -> list[Equivalent]:
    return parse_equivalents(path.read_text(), str(path)) if path.is_file() else []


def parse_equivalents(text: str, where: str) -> list[Equivalent]:
    """The entries of an equivalents file's ``text`` (``where``: its name, for the error)."""
    data = tomllib.loads(text)
    out = []
    for i, entry in enumerate(data.get("mutant", [])):
        missing = {"module", "function", "line", "mutated", "reason"} - set(entry)
        if missing or not str(entry.get("reason", "")).strip():
            raise SystemExit(f"ERROR: {where} entry {i + 1} needs module, function, line, mutated and a reason")
        out.append(
            Equivalent(
                entry["module"],
                entry["function"],
                "\n".join(s.strip() for s in entry["line"].splitlines()),
                "\n".join(s.strip() for s in entry["mutated"].splitlines()),
                entry["reason"].strip(),
            )
        )
    return out


def stage(module: Module, again: bool) -> Path:
    """A copy of the package and tests, with a mutmut configuration for this module.

    Fresh, unless `again`: then the last run's results stay, and the copy is refreshed
    (copy2 keeps modification times, so mutmut regenerates only what changed).
    """
    where = STAGE / module.slug
    if not again:
        shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    shutil.copytree(ROOT / "device_matrix", where / "device_matrix", ignore=junk, dirs_exist_ok=True)
    shutil.copytree(ROOT / "tests", where / "tests", ignore=junk, dirs_exist_ok=True)
    shutil.copy2(ROOT / "pyproject.toml", where / "pyproject.toml")
    tests = "".join(f"\n    {t}" for t in module.tests)
    (where / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = device_matrix\n"
        f"only_mutate = {module.path}\n"
        f"pytest_add_cli_args_test_selection ={tests}\n"
        # the stage has no git history of its own; change detection has nothing to say
        "use_git_change_detection = false\n"
        # a mutant that loops forever is killed after 4x (not 15x) the CPU time its tests
        # take; CPU time, so a loaded machine does not turn slow tests into timeouts
        "timeout_multiplier = 4\n"
    )
    return where


def _codes(module: Module, where: Path) -> dict[str, int | None]:
    """mutmut's exit code for each mutant of `module` in the run in `where`."""
    meta = where / "mutants" / (module.path + ".meta")
    return dict(json.loads(meta.read_text())["exit_code_by_key"]) if meta.is_file() else {}


def run_module(
    module: Module, max_children: int, mutmut: str, again: bool
) -> tuple[Path, float, str, dict[str, int | None]]:
    """Run mutmut on `module`; its stage, the time taken, an error, and earlier verdicts kept."""
    from mutmut.stats import status_by_exit_code

    where = STAGE / module.slug
    # `again`: only what survived last time is tried again, against the current tests;
    # the rest keeps last time's verdict
    earlier = {
        name: code
        for name, code in (_codes(module, where) if again else {}).items()
        if not module.functions or function_of(name, module.dotted) in module.functions
    }
    retry = [name for name, code in earlier.items() if status_by_exit_code[code] not in KILLED]
    kept = {name: code for name, code in earlier.items() if name not in retry}
    if earlier and not retry:
        return where, 0.0, "", kept
    where = stage(module, again=bool(earlier))
    patterns = retry or [f"{module.dotted}.{_key(f)}__mutmut_*" for f in module.functions]
    start = time.monotonic()
    with (where / "mutmut.log").open("w") as log:
        proc = subprocess.run(
            [mutmut, "run", "--max-children", str(max_children), *patterns],
            cwd=where,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
        )
    seconds = time.monotonic() - start
    error = ""
    if proc.returncode != 0:
        tail = (where / "mutmut.log").read_text(errors="replace")[-3000:]
        error = f"mutmut exited {proc.returncode}; the end of {where / 'mutmut.log'}:\n{tail}"
    return where, seconds, error, kept


def _key(function: str) -> str:
    """mutmut's name for a function: `x_name`, or `xǁClassǁmethod`."""
    cls, _, fn = function.rpartition(".")
    return f"xǁ{cls}ǁ{fn}" if cls else f"x_{fn}"


def read_results(
    module: Module, where: Path, seconds: float, equivalents: list[Equivalent], kept: dict[str, int | None]
) -> Result:
    from mutmut.configuration import reset_config
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    codes = {**_codes(module, where), **kept}
    mutants = []
    here = Path.cwd()
    os.chdir(where)
    reset_config()
    try:
        for name, code in codes.items():
            fn = function_of(name, module.dotted)
            if module.functions and fn not in module.functions:
                continue
            m = Mutant(name, fn, status_by_exit_code[code])
            m.removed, m.added = split_diff(get_diff_for_mutant(name, path=module.path))
            mutants.append(m)
    finally:
        os.chdir(here)
        reset_config()
    errors = []
    told = [e for e in equivalents if e.module == module.path]
    for eq in (e for e in told if not module.functions or e.function in module.functions):
        hits = [m for m in mutants if m.function == eq.function and m.removed == eq.line and m.added == eq.mutated]
        if not hits:
            errors.append(f"equivalent entry matches no mutant (stale?): {eq.function}: {eq.mutated!r}")
        for m in hits:
            if m.status in KILLED:
                errors.append(f"listed as equivalent but a test kills it: {m.name}: {eq.mutated!r}")
            else:
                m.reason = eq.reason
    return Result(module, sorted(mutants, key=lambda m: _natural(m.name)), seconds, errors)


def _natural(name: str) -> tuple[str, int]:
    base, _, n = name.rpartition("__mutmut_")
    return base, int(n) if n.isdigit() else 0


def changed_modules(modules: list[Module], base: str, equivalents_file: str) -> list[Module]:
    """The modules a change against `base` (committed or not) may have made weaker, each
    narrowed to the functions to mutate: those whose lines the change touched
    (:func:`touched_functions`) or whose equivalent entries changed; every one where a
    mapped test file lost or changed a line, or is new. Tests only added to can only kill
    more: a module whose source and entries are unchanged is left out then."""
    # each changed file, with whether the change removes or changes a line of it (not only adds)
    removes: dict[str, bool] = {}
    for line in _git("diff", "--numstat", "--no-renames", base, "--").splitlines():
        _, deleted, path = line.split("\t", 2)
        removes[path] = deleted != "0"  # "-": a binary file
    changed = set(removes) | set(_git("ls-files", "--others", "--exclude-standard").split())
    at_base = set(_git("ls-tree", "-r", "--name-only", base).splitlines())
    entries = _entries_changed(base, equivalents_file) if equivalents_file in changed else set()
    picked = []
    for m in modules:
        if m.path not in at_base or any(removes.get(t, False) for t in m.tests):
            picked.append(m)
            continue
        functions = {f for path, f in entries if path == m.path}
        if m.path in changed:
            source = (ROOT / m.path).read_text(encoding="utf-8")
            functions.update(touched_functions(source, added_lines(_git("diff", "-U0", base, "--", m.path))))
        narrowed = sorted(f for f in functions if not m.functions or f in m.functions)
        if narrowed:
            picked.append(Module(m.path, m.tests, m.threshold, narrowed, narrowed=True))
    return picked


def _entries_changed(base: str, equivalents_file: str) -> set[tuple[str, str]]:
    """(module, function) of each equivalent entry added, removed or changed against `base`."""
    shown = subprocess.run(
        ["git", "show", f"{base}:{equivalents_file}"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    was = parse_equivalents(shown.stdout if shown.returncode == 0 else "", f"{base}:{equivalents_file}")
    before, after = set(was), set(load_equivalents(ROOT / equivalents_file))
    return {(e.module, e.function) for e in before ^ after}


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ERROR: git {' '.join(args)} failed: {proc.stderr.strip()}\nTIP: --changed BASE_REF")
    return proc.stdout


def added_lines(diff: str) -> set[int]:
    """The new file's line numbers a `git diff -U0` adds or changes; a pure removal counts
    the line after it (where the removed code was)."""
    lines: set[int] = set()
    for header in re.finditer(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", diff, re.MULTILINE):
        start, count = int(header[1]), int(header[2] if header[2] is not None else 1)
        lines.update(range(start, start + count) if count else (start, start + 1))
    return lines


def touched_functions(source: str, lines: set[int]) -> list[str]:
    """The functions mutmut mutates (a module's functions, `Class.method` of its classes;
    a nested def is its outer function's) holding one of `lines`, decorators included."""
    found = []
    for node in ast.parse(source).body:
        members = [(node, node.name)] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if isinstance(node, ast.ClassDef):
            defs = (m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
            members = [(m, f"{node.name}.{m.name}") for m in defs]
        for fn, name in members:
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            if any(first <= n <= (fn.end_lineno or fn.lineno) for n in lines):
                found.append(name)
    return found


def fmt_time(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def report(results: list[Result], equivalents_file: str) -> None:
    print()
    print(f"{'module':<34} {'mutants':>7} {'killed':>6} {'survived':>8} {'equivalent':>10}", end="")
    print(f" {'score':>6} {'needs':>5} {'time':>6}")
    for r in results:
        print(
            f"{r.module.path.removeprefix('device_matrix/'):<34} {len(r.mutants):>7} {r.killed:>6} "
            f"{len(r.survived):>8} {r.equivalent:>10} {r.score:>5.1f}% {r.module.threshold:>4.0f}% "
            f"{fmt_time(r.seconds):>6}  {'ok' if r.ok else 'FAIL'}"
        )
    for r in results:
        if r.survived:
            where = f"build/mutation/{r.module.slug}"
            print(f"\nsurvived in {r.module.path} ({len(r.survived)}; `mutmut show NAME` in {where}):")
            for m in r.survived:
                print(f"  {m.name}  [{m.status}]")
                for line in m.removed.splitlines():
                    print(f"    - {line}")
                for line in m.added.splitlines():
                    print(f"    + {line}")
        eq = [m for m in r.mutants if m.reason]
        if eq:
            print(f"\nequivalent in {r.module.path} ({len(eq)}, from {equivalents_file}):")
            for m in eq:
                print(f"  {m.name}: {m.reason}")
        for e in r.errors:
            print(f"\nERROR: {r.module.path}: {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--plan", required=True, type=Path, help="JSON file: {modules: {path: {tests, threshold}}, equivalents}"
    )
    ap.add_argument(
        "--changed",
        metavar="BASE",
        help="only what a change against this git ref may have weakened (changed_modules)",
    )
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="print the modules that would run, run nothing")
    ap.add_argument(
        "--again",
        action="store_true",
        help="retry only the last run's survivors against the current tests (while writing tests; not a verdict)",
    )
    ap.add_argument("only", nargs="*", metavar="MODULE", help="module paths (or parts of them) to run")
    args = ap.parse_args(argv)
    plan: dict[str, Any] = json.loads(args.plan.read_text())
    modules = [
        Module(path, spec["tests"], float(spec["threshold"]), list(spec.get("functions", [])))
        for path, spec in plan["modules"].items()
    ]
    equivalents_file: str = plan["equivalents"]
    if args.only:
        modules = [m for m in modules if any(o in m.path for o in args.only)]
        if not modules:
            print(f"ERROR: no module matches {args.only}\nTIP: one of {', '.join(plan['modules'])}")
            return 2
    if args.changed:
        modules = changed_modules(modules, args.changed, equivalents_file)
        if not modules:
            print(f"no mutation-tested module, its tests or {equivalents_file} changed against {args.changed}")
            return 0
    if args.list:
        for m in modules:
            print(f"{m.path}: {', '.join(m.tests)} (threshold {m.threshold:.0f}%)")
        return 0
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or "mutmut"
    equivalents = load_equivalents(ROOT / equivalents_file)
    results = []
    for module in modules:
        only = f" (the functions changed: {', '.join(module.functions)})" if module.narrowed else ""
        print(f"mutating {module.path}{only} against {', '.join(module.tests)}", flush=True)
        where, seconds, error, kept = run_module(module, args.max_children, mutmut, args.again)
        result = read_results(module, where, seconds, equivalents, kept)
        if error:
            result.errors.insert(0, error)
        results.append(result)
        print(f"  {len(result.mutants)} mutants, {result.killed} killed, {result.score:.1f}% in {fmt_time(seconds)}")
    report(results, equivalents_file)
    (STAGE / "summary.json").write_text(
        json.dumps(
            {
                r.module.path: {
                    "mutants": len(r.mutants),
                    "killed": r.killed,
                    "survived": len(r.survived),
                    "equivalent": r.equivalent,
                    "score": round(r.score, 1),
                    "threshold": r.module.threshold,
                    "seconds": round(r.seconds, 1),
                    "survivors": [m.name for m in r.survived],
                }
                for r in results
            },
            indent=2,
        )
    )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
