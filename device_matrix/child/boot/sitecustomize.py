"""Started by ``site`` in the interpreter the script launcher became (``python FILE ARGS``).

It takes the launcher's settings out of the environment, puts PYTHONPATH and sys.path back
as ``python FILE`` has them, runs the ``sitecustomize`` this one stands in front of (if the
interpreter has one) and installs the journaling (:func:`device_matrix.child.script.boot`).
Without the launcher's settings it only stands aside.
"""

# os.path, not pathlib: this runs in every launched script before its __main__; the less
# it imports the less a script sees of it
# ruff: noqa: PTH100, PTH120

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback

BOOT_ENV = "DEVICE_MATRIX_SCRIPT_BOOT"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """The interpreter's own sitecustomize, imported as site would have imported it."""
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        # what site does with a sitecustomize that fails: say so, and go on
        print("Error in sitecustomize; set PYTHONVERBOSE for traceback:", file=sys.stderr)
        traceback.print_exc()


def _main() -> None:
    raw = os.environ.pop(BOOT_ENV, None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    settings = json.loads(raw) if raw is not None else None
    if settings is not None:
        # PYTHONPATH as the launcher was given it: the script's own subprocesses inherit that
        if settings["pythonpath"] is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = settings["pythonpath"]
    _chain()
    if settings is None:
        return
    # the launcher's own copy of the package, wherever it came from (a checkout, site-packages)
    sys.path.insert(0, settings["package"])
    try:
        from device_matrix.child import script
    finally:
        del sys.path[0]
    script.boot(settings)


try:
    _main()
except BaseException as exc:  # a script must not run unrecorded: the launcher's start failed
    print(f"device-matrix: the script launcher could not start: {exc!r}", file=sys.stderr)
    traceback.print_exc()
    os._exit(2)
