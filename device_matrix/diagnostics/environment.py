"""An environment snapshot: versions, drivers, device variables, image and host.

Taken inside the test interpreter (the plugin writes it into the journal at session
start), so a container row reports the container's versions, not the host's. Package
versions come from installed metadata: nothing heavy is imported.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

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
    "torch_xla_cuda_plugin",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "numpy",
    "pytest",
    "device-matrix",
)

ENV_RE = re.compile(
    r"^(PJRT_|XLA_|TPU_|NEURON_|LIBTPU|CUDA_|NVIDIA_|GPU_NUM|CPU_NUM|TF_CPP_|TORCH_|PT_XLA|"
    r"OMP_NUM|.*_VISIBLE_(DEVICES|CORES)$|DEVICE_MATRIX_|PYTHONPATH$|LD_LIBRARY_PATH$)"
)

DRIVER_TOOLS: dict[str, list[str]] = {
    "nvidia-smi": [
        "nvidia-smi",
        "--query-gpu=name,driver_version,memory.total",
        "--format=csv,noheader",
    ],
    "neuron-ls": ["neuron-ls", "--json-output"],
}


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in PACKAGES:
        try:
            out[name.replace("-", "_")] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _drivers(timeout: float = 10.0) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, argv in DRIVER_TOOLS.items():
        if shutil.which(argv[0]) is None:
            continue
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            text = (proc.stdout or proc.stderr).strip()
            out[name] = text[:2000] if proc.returncode == 0 else f"exit {proc.returncode}: {text[:500]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            out[name] = f"failed: {exc}"
    return out


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
    }
