"""An environment snapshot: versions, drivers, device variables, image and host.

Taken inside the test interpreter (the plugin writes it into the journal at session
start), so a container row reports the container's versions, not the host's. Package
versions come from installed metadata: nothing heavy is imported.

:func:`facets` reads a snapshot (of any version) as the few values a crash is placed by
(#25): accelerator model, driver, CUDA, runtime packages, image, host, Python.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from device_matrix.devices import ask_tool
from device_matrix.redact import Redactor

PACKAGES = (
    "torch",
    "torch_xla",
    "torch-xla",
    "libtpu",
    "libtpu-nightly",
    "jax",
    "jaxlib",
    "torch-neuronx",
    "neuronx-cc",
    "libneuronxla",
    "torch_xla_cuda_plugin",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "numpy",
    "pytest",
    "device-matrix",
)

ENV_RE = re.compile(
    # PYTORCH_TEST_: torch's test flags, which pytorch/xla's run_tests.sh exports (#29)
    r"^(PJRT_|XLA_|TPU_|NEURON_|LIBTPU|CUDA_|NVIDIA_|GPU_NUM|CPU_NUM|TF_CPP_|TORCH_|PT_XLA|PYTORCH_TEST_|"
    r"OMP_NUM|.*_VISIBLE_(DEVICES|CORES)$|DEVICE_MATRIX_|PYTHONPATH$|LD_LIBRARY_PATH$)"
)

DRIVER_TOOLS: dict[str, list[str]] = {
    "nvidia-smi": [
        "nvidia-smi",
        "--query-gpu=name,driver_version,memory.total",
        "--format=csv,noheader",
    ],
    # the header of the full query names the CUDA version the driver supports
    "nvidia-smi-cuda": ["nvidia-smi", "-q", "-d", "COMPUTE"],
    # the plain listing names the instance type (trn1.2xlarge): the JSON output is retired
    "neuron-ls": ["neuron-ls"],
}
NEURON_DRIVER_VERSION = Path("/sys/module/neuron/version")
FACET_LIMIT = 200  # characters of one facet value: the snapshot comes from the child, untrusted


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in PACKAGES:
        try:
            out[name.replace("-", "_")] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _drivers(timeout: float = 10.0) -> dict[str, str]:
    """What each driver tool says. A tool is an untrusted child (#30): it runs in its own
    process group, ended with whatever it started when it does not answer in ``timeout``,
    and a tool that did not answer is not asked again (``nvidia-smi -q`` after the query);
    output that is not UTF-8 is kept, its bad bytes replaced."""
    out: dict[str, str] = {}
    hung: set[str] = set()
    for name, argv in DRIVER_TOOLS.items():
        if argv[0] in hung:
            out[name] = f"failed: not asked, {argv[0]} did not answer"
            continue
        if shutil.which(argv[0]) is None:
            continue
        try:
            code, text = ask_tool(argv, timeout)
        except OSError as exc:
            out[name] = f"failed: {exc}"
            continue
        if code is None:
            hung.add(argv[0])
            out[name] = f"failed: {argv[0]} did not answer in {timeout:g} s (ended)"
            continue
        out[name] = text[:2000] if code == 0 else f"exit {code}: {text[:500]}"
    return out


def _neuron_driver() -> str | None:
    try:
        return NEURON_DRIVER_VERSION.read_text("utf-8", "replace").strip()[:100] or None
    except OSError:
        return None


def snapshot(environ: Mapping[str, str] | None = None, *, drivers: bool = True) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    redactor = Redactor(env)
    variables = {k: v for k, v in env.items() if ENV_RE.match(k)}
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "host": socket.gethostname(),
        "packages": _versions(),
        "drivers": _drivers() if drivers else {},
        "variables": redactor.env(variables),
        "container_image": env.get("DEVICE_MATRIX_IMAGE") or None,
        "in_container": Path("/.dockerenv").exists() or Path("/run/.containerenv").exists(),
        "neuron_driver": _neuron_driver() if drivers else None,
    }


# --- facets: what a crash is placed by ------------------------------------------------

# in the order they are named: the first that separates crashes from passes reads best
FACETS = (
    "accelerator",
    "driver",
    "cuda",
    "cuda_runtime",
    "torch",
    "torch_xla",
    "libtpu",
    "torch_neuronx",
    "neuronx_cc",
    "image",
    "host",
    "python",
)
FACET_WORDS = {
    "accelerator": "accelerator",
    "driver": "driver",
    "cuda": "CUDA (driver)",
    "cuda_runtime": "CUDA runtime",
    "torch": "torch",
    "torch_xla": "torch_xla",
    "libtpu": "libtpu",
    "torch_neuronx": "torch-neuronx",
    "neuronx_cc": "neuronx-cc",
    "image": "image",
    "host": "host",
    "python": "Python",
}
_CUDA_RE = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
_INSTANCE_RE = re.compile(r"instance-type:\s*(\S+)")
_LOCAL_CUDA_RE = re.compile(r"\+cu(\d+)(\d)$")


def _value(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    text = " ".join(str(v).split())
    return text[:FACET_LIMIT] if text else None


def _nvidia(text: str) -> tuple[str | None, str | None]:
    """(model, driver) from ``nvidia-smi --query-gpu=name,driver_version,...`` CSV lines."""
    if text.startswith(("exit ", "failed: ")):
        return None, None
    models: list[str] = []
    drivers: set[str] = set()
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0]:
            models.append(parts[0])
            drivers.add(parts[1])
    if not models:
        return None, None
    # one model on most hosts; a mixed host names each, with its count
    counted = {m: models.count(m) for m in dict.fromkeys(models)}
    model = " + ".join(m if n == 1 else f"{n}x {m}" for m, n in counted.items())
    return model, " + ".join(sorted(drivers)) or None


def facets(environment: Mapping[str, Any], *, image: str | None = None) -> dict[str, str]:
    """The facets of one row's run, from its environment snapshot; unknown ones are left out."""
    env: Mapping[str, Any] = environment if isinstance(environment, Mapping) else {}

    def table(key: str) -> Mapping[str, Any]:
        value = env.get(key)
        return value if isinstance(value, Mapping) else {}

    drivers, packages, variables = table("drivers"), table("packages"), table("variables")
    out: dict[str, str | None] = {}
    smi = drivers.get("nvidia-smi")
    if isinstance(smi, str):
        out["accelerator"], out["driver"] = _nvidia(smi)
    cuda = drivers.get("nvidia-smi-cuda")
    if isinstance(cuda, str) and (m := _CUDA_RE.search(cuda)):
        out["cuda"] = m.group(1)
    neuron = drivers.get("neuron-ls")
    if not out.get("accelerator") and isinstance(neuron, str) and (m := _INSTANCE_RE.search(neuron)):
        out["accelerator"] = f"Neuron {m.group(1)}"
    if not out.get("driver") and env.get("neuron_driver"):
        out["driver"] = f"neuron {env['neuron_driver']}"
    tpu = variables.get("TPU_ACCELERATOR_TYPE")
    if not out.get("accelerator") and tpu:
        out["accelerator"] = f"TPU {tpu}"
    runtime = packages.get("nvidia_cuda_runtime_cu12")
    torch = packages.get("torch")
    if runtime:
        out["cuda_runtime"] = str(runtime)
    elif isinstance(torch, str) and (m := _LOCAL_CUDA_RE.search(torch)):
        out["cuda_runtime"] = f"{m.group(1)}.{m.group(2)}"
    for name in ("torch", "torch_xla", "libtpu", "torch_neuronx", "neuronx_cc"):
        out[name] = _value(packages.get(name))
    out["image"] = _value(env.get("container_image") or image)
    out["host"] = _value(env.get("host"))
    out["python"] = _value(env.get("python"))
    return {k: v for k in FACETS if (v := _value(out.get(k))) is not None}
