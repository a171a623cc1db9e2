"""A git repository shaped like a torch_xla project, with a history, for bench/selection.py.

The package ``fakexla`` has 20 modules in torch_xla's places (core, distributed, utils,
amp, debug, optim, _internal), each importing modules below it; ``tests/`` holds a file
of small pytest tests per module (the distributed ones wait on a "device" fixture, so
they cost more, as device tests do), one ``conftest.py`` and a ``pyproject.toml``. The
history (one commit per step, deterministic for a seed) edits it as people do: a constant
tuned, a condition changed, a line added, a function or a call added, a refactor that
keeps behaviour, a test added, now and then the conftest or the pyproject. After every
behaviour change the tests' expected values are brought up to date in the same commit,
as a change that keeps CI green would.

    python bench/_fixture_repo.py /tmp/fixture --commits 60
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MODULES = [
    "_internal/env",
    "_internal/pjrt",
    "utils/shapes",
    "utils/dtypes",
    "utils/cache",
    "core/device",
    "core/tensor",
    "core/lowering",
    "core/xla_model",
    "debug/metrics",
    "debug/profiler",
    "amp/autocast",
    "amp/grad_scaler",
    "distributed/mesh",
    "distributed/collectives",
    "distributed/spmd",
    "distributed/fsdp",
    "optim/sgd",
    "optim/adam",
    "runtime",
]
OPS = [">", ">=", "<", "<="]
USES = ["add", "clamp", "clamp"]
WORDS = ["reduce", "pad", "tile", "cast", "scale", "shard", "fold", "merge", "probe", "bucket", "align", "split"]
KINDS = ["const"] * 8 + ["cond"] * 2 + ["add_line"] * 4 + ["refactor"] * 3 + ["add_fn"] * 2
KINDS += ["add_call"] * 2 + ["add_test"] * 3 + ["two_modules"] * 2 + ["conftest", "pyproject"]


@dataclass
class Fn:
    name: str
    k: list[int]  # the scale, the loop length, the threshold, the branch step
    op: str
    # (module, function, how) of modules below this one; "clamp": the caller reads little of
    # the value (as most callers do), so most changes below it do not reach its tests
    calls: list[tuple[str, str, str]]
    extra: list[tuple[str, int]] = field(default_factory=list)  # added lines: ("+", 3), ("step", 2) ...
    inputs: list[int] = field(default_factory=list)  # the x of each test of it


@dataclass
class Model:
    rng: random.Random
    fns: dict[str, list[Fn]] = field(default_factory=dict)  # module -> its functions
    scale: int = 2  # the conftest's `scale` fixture
    markers: list[str] = field(default_factory=lambda: ["device: needs a device"])
    version: int = 1

    def new_fn(self, module: str) -> Fn:
        rng = self.rng
        taken = {f.name for f in self.fns.get(module, [])}
        name = next(f"{w}_{i}" for i in range(99) for w in rng.sample(WORDS, len(WORDS)) if f"{w}_{i}" not in taken)
        below = MODULES[: MODULES.index(module)]
        calls = []
        if below:
            dep = rng.choice(below[-6:])
            if self.fns.get(dep):
                calls.append((dep, rng.choice(self.fns[dep]).name, rng.choice(USES)))
        k = [rng.randint(1, 5), rng.randint(1, 4), rng.randint(3, 12), rng.randint(1, 9)]
        inputs = sorted({rng.randint(0, 15) for _ in range(rng.randint(2, 3))})
        return Fn(name, k, rng.choice(OPS), calls, inputs=inputs)


def _alias(module: str) -> str:
    return module.rsplit("/", 1)[-1]


def render_module(model: Model, module: str) -> str:
    deps = sorted({dep for f in model.fns[module] for dep, _, _ in f.calls})
    lines = [f'"""fakexla.{module.replace("/", ".")}: part of the replay fixture."""', ""]
    for dep in deps:
        pkg, _, leaf = dep.rpartition("/")
        lines.append(f"from fakexla{'.' + pkg.replace('/', '.') if pkg else ''} import {leaf}")
    if deps:
        lines.append("")
    for fn in model.fns[module]:
        lines += ["", "", *render_fn(fn)]
    return "\n".join(lines) + "\n"


def render_fn(fn: Fn) -> list[str]:
    k0, k1, k2, k3 = fn.k
    body = [
        f"def {fn.name}(x, flag=True):",
        f"    total = x * {k0}",
        "    items = []",
        f"    for i in range({k1}):",
        "        items.append(i + x)",
        "    total = total + sum(items)",
        f"    if x {fn.op} {k2}:",
        f"        total = total - {k3}",
        "    elif flag and x % 2 == 0:",
        "        total = total + 1",
    ]
    for dep, name, how in fn.calls:
        call = f"{_alias(dep)}.{name}(x % 7, flag=not flag)"
        body.append(f"    total = total + {call if how == 'add' else f'min({call}, 2)'}")
    for how, n in fn.extra:
        if how == "step":  # the refactored form of a "+" line: the same value, two lines
            body += [f"    step = {n}", "    total = total + step"]
        elif how == "+":
            body.append(f"    total = total + {n}")
        else:
            body.append(f"    total = total * {n}")
    body.append("    return total")
    return body


def test_path(module: str) -> str:
    sub = "distributed/" if module.startswith("distributed/") else ""
    return f"tests/{sub}test_{_alias(module)}.py"


def render_tests(model: Model, module: str, expected: dict[str, int]) -> str:
    pkg, _, leaf = module.rpartition("/")
    device = module.startswith("distributed/")
    lines = [f"from fakexla{'.' + pkg.replace('/', '.') if pkg else ''} import {leaf}", ""]
    for fn in model.fns[module]:
        for j, x in enumerate(fn.inputs):
            key = f"{module}:{fn.name}:{x}"
            args = "scale, device" if device else "scale"
            check = f"    assert {leaf}.{fn.name}({x} * scale) == {expected[key]}"
            lines += ["", "", f"def test_{fn.name}_{j}({args}):", check]
    return "\n".join(lines) + "\n"


CONFTEST = '''"""Fixtures every test file of the replay fixture shares."""

import time

import pytest


@pytest.fixture
def scale():
    return {scale}


@pytest.fixture
def device():
    time.sleep(0.02)  # bringing a device up costs time, as on a real row
    return "cpu"
'''

PYPROJECT = """[project]
name = "fakexla"
version = "0.{version}.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
markers = [{markers}]
"""

EVALUATE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
out = {}
for module, name, x in json.loads(sys.stdin.read()):
    mod = importlib.import_module("fakexla." + module.replace("/", "."))
    out[f"{module}:{name}:{x}"] = getattr(mod, name)(x)
print(json.dumps(out))
"""


def write_tree(root: Path, model: Model) -> None:
    """Every file of the project as the model has it, expected values computed by running it."""
    pkg = root / "fakexla"
    for module in MODULES:
        path = pkg / f"{module}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent.parts and parent.parts[0] == "fakexla":
                (root / parent / "__init__.py").touch()
        path.write_text(render_module(model, module))
    calls = [(m, f.name, x * model.scale) for m in MODULES for f in model.fns[m] for x in f.inputs]
    proc = subprocess.run(
        [sys.executable, "-c", EVALUATE, str(root)],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        check=True,
    )
    values = json.loads(proc.stdout)
    for module in MODULES:
        expected = {
            f"{module}:{f.name}:{x}": values[f"{module}:{f.name}:{x * model.scale}"]
            for f in model.fns[module]
            for x in f.inputs
        }
        path = root / test_path(module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_tests(model, module, expected))
    (root / "conftest.py").write_text(CONFTEST.format(scale=model.scale))
    markers = ", ".join(json.dumps(m) for m in model.markers)
    (root / "pyproject.toml").write_text(PYPROJECT.format(version=model.version, markers=markers))


def edit(model: Model, kind: str) -> str:
    """Change the model as one commit would; the commit's message."""
    rng = model.rng
    module = rng.choice(MODULES)
    fn = rng.choice(model.fns[module])
    where = f"{module}.{fn.name}"
    if kind == "const":
        i = rng.randrange(4)
        fn.k[i] = max(1, fn.k[i] + rng.choice([-2, -1, 1, 2]))
        return f"{where}: tune a constant"
    if kind == "cond":
        fn.op = rng.choice([o for o in OPS if o != fn.op])
        return f"{where}: the threshold's comparison"
    if kind == "add_line":
        fn.extra.append((rng.choice(["+", "+", "*"]), rng.randint(2, 5)))
        return f"{where}: one more adjustment"
    if kind == "refactor":
        plus = [i for i, (how, _) in enumerate(fn.extra) if how == "+"]
        if not plus:
            fn.extra.append(("+", rng.randint(2, 5)))
            return f"{where}: one more adjustment"
        i = rng.choice(plus)
        fn.extra[i] = ("step", fn.extra[i][1])
        return f"{where}: name the step (no change in behaviour)"
    if kind == "add_fn":
        model.fns[module].append(model.new_fn(module))
        return f"{module}: a new function and its tests"
    if kind == "add_call":
        below = [m for m in MODULES[: MODULES.index(module)] if model.fns[m]]
        if not below:
            return edit(model, "const")
        dep = rng.choice(below)
        fn.calls.append((dep, rng.choice(model.fns[dep]).name, rng.choice(USES)))
        return f"{where}: use {dep}"
    if kind == "add_test":
        fresh = [x for x in range(16) if x not in fn.inputs]
        fn.inputs.append(rng.choice(fresh))
        return f"tests: {where} on one more input"
    if kind == "two_modules":
        other = rng.choice(model.fns[rng.choice(MODULES)])
        fn.k[0] += 1
        other.k[3] = max(1, other.k[3] - 1)
        return f"{where} and {other.name}: adjust together"
    if kind == "conftest":
        model.scale = 3 if model.scale == 2 else 2
        return "conftest: the scale fixture"
    model.version += 1
    model.markers.append(f"slow{model.version}: a slow test")
    return "pyproject: a version and a marker"


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid", "PATH": "/usr/bin:/bin"}
    env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = "2026-01-01T00:00:00Z"
    proc = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True)
    return proc.stdout


def build(root: Path, commits: int = 60, seed: int = 34) -> list[str]:
    """A fresh repository at ``root`` with ``commits`` commits after the first; their shas, oldest first."""
    model = Model(rng=random.Random(seed))
    for module in MODULES:
        model.fns[module] = []
        for _ in range(model.rng.randint(3, 4)):
            model.fns[module].append(model.new_fn(module))
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text("__pycache__/\n.testmondata*\n")
    write_tree(root, model)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fakexla: the first modules and their tests")
    for _ in range(commits):
        message = edit(model, model.rng.choice(KINDS))
        write_tree(root, model)
        _git(root, "add", "-A")
        if _git(root, "status", "--porcelain").strip():
            _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-list", "--reverse", "HEAD").split()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", type=Path, default=Path(tempfile.mkdtemp(prefix="fakexla-")))
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    shas = build(args.root, args.commits, args.seed)
    print(f"{args.root}: {len(shas)} commits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
