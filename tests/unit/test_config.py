"""Configuration: defaults, overrides, one precedence, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.errors import EXIT_CONFIG, ConfigError


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(body)
    return tmp_path


def test_packaged_defaults_have_the_four_rows(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, ""))
    assert list(cfg.rows) == ["cpu", "tpu", "cuda", "neuron"]
    tpu = cfg.row("tpu")
    assert tpu.pjrt_device == "TPU"
    assert "--privileged" in tpu.container_options and "--net=host" in tpu.container_options
    assert cfg.row("cuda").container_options[:2] == ("--gpus", "all")
    assert "--device=/dev/neuron*" in cfg.row("neuron").container_options
    assert cfg.row("cpu").env["PJRT_DEVICE"] == "CPU"
    assert cfg.row("cpu").presence[0] == "env:DEVICE_MATRIX_CPU_PRESENT"
    assert cfg.results_dir == tmp_path / "results"


def test_project_overrides_key_by_key_and_merges_env(tmp_path: Path) -> None:
    cfg = config.load(
        write(
            tmp_path,
            """
[tool.device-matrix]
crash_reruns = 5
[tool.device-matrix.devices.tpu]
image = "example.com/xla:tpu"
[tool.device-matrix.devices.tpu.env]
XLA_FLAGS = "--xla_dump_to=/tmp/d"
[tool.device-matrix.devices.cpu.settings]
accumulation_rtol = 1e-5
""",
        )
    )
    tpu = cfg.row("tpu")
    assert tpu.image == "example.com/xla:tpu"
    assert tpu.env["PJRT_DEVICE"] == "TPU" and tpu.env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d"
    assert tpu.runner_labels == ("self-hosted", "tpu")  # untouched keys keep the default
    # the packaged rows have no settings (those are a project's, #20): only the project's
    assert dict(cfg.row("cpu").settings) == {"accumulation_rtol": 1e-5}
    assert cfg.crash_reruns == 5


def test_new_row_is_added_and_disabled_rows_vanish(tmp_path: Path) -> None:
    cfg = config.load(
        write(
            tmp_path,
            """
[tool.device-matrix.devices.cpu-bf16]
pjrt_device = "CPU"
suites = ["mlp"]
[tool.device-matrix.devices.neuron]
enabled = false
""",
        )
    )
    assert "cpu-bf16" in cfg.rows and "neuron" not in cfg.rows
    assert cfg.row("cpu-bf16").suites == ("mlp",)


def test_precedence_env_then_command_line(tmp_path: Path) -> None:
    root = write(tmp_path, '[tool.device-matrix]\nresults_dir = "from-file"\n')
    assert config.load(root, environ={}).results_dir == root / "from-file"
    env = {"DEVICE_MATRIX_RESULTS_DIR": "from-env"}
    assert config.load(root, environ=env).results_dir == root / "from-env"
    assert config.load(root, environ=env, results_dir="from-cli").results_dir == root / "from-cli"


def test_the_command_line_is_the_last_layer_of_the_same_cascade(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        """
[tool.device-matrix]
crash_reruns = 5
[tool.device-matrix.devices.cpu]
test_timeout = 30
[tool.device-matrix.devices.extra]
pjrt_device = "CPU"
run_timeout = 100
""",
    )
    cfg = config.load(root, environ={})
    assert (cfg.crash_reruns, cfg.max_restarts) == (5, 20)
    assert (cfg.row("cpu").test_timeout, cfg.row("extra").run_timeout) == (30.0, 100.0)
    cfg = config.load(root, environ={}, crash_reruns=0, max_restarts=3, test_timeout=7.5, run_timeout=60.0)
    assert (cfg.crash_reruns, cfg.max_restarts) == (0, 3)  # 0 is a value, not "unset"
    # a timeout on the command line is every row's: the packaged ones and the project's new one
    assert {(r.test_timeout, r.run_timeout) for r in cfg.rows.values()} == {(7.5, 60.0)}
    assert len(cfg.rows) == 5
    # what the command line leaves unset keeps the file's value
    assert config.load(root, environ={}, run_timeout=60.0).row("cpu").test_timeout == 30.0
    with pytest.raises(ConfigError) as err:
        config.load(root, environ={}, crash_reruns=10**6)
    assert "command line" in str(err.value) and "crash_reruns" in str(err.value)


@pytest.mark.parametrize(
    ("body", "key", "allowed"),
    [
        (
            "[tool.device-matrix]\nresult_dir = 'x'\n",
            "tool.device-matrix.result_dir",
            "results_dir",
        ),
        (
            "[tool.device-matrix.devices.tpu]\nimage = 3\n",
            "tool.device-matrix.devices.tpu.image",
            "string",
        ),
        (
            "[tool.device-matrix.devices.tpu]\npjrt_device = 'GPU'\n",
            "pjrt_device",
            "CPU | TPU | CUDA | NEURON",
        ),
        ("[tool.device-matrix.devices.x]\nsuites = ['a']\n", "devices.x.pjrt_device", "CPU"),
        ("[tool.device-matrix.devices.tpu]\npresence = ['file:/x']\n", "presence", "env:VAR"),
        ("[tool.device-matrix]\ncrash_reruns = -1\n", "crash_reruns", None),
        ("[tool.device-matrix]\ncrash_reruns = true\n", "crash_reruns", "whole number"),
        ("[tool.device-matrix.tracker]\nkind = 'github'\n", "tracker.repository", "owner/name"),
    ],
)
def test_bad_config_names_file_key_and_allowed(tmp_path: Path, body: str, key: str, allowed: str | None) -> None:
    root = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        config.load(root, environ={})
    err = info.value
    assert err.exit_code == EXIT_CONFIG
    assert str(root / "pyproject.toml") in str(err)
    assert key in str(err)
    if allowed:
        assert allowed in str(err)


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    root = write(tmp_path, "[tool.device-matrix\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(root)


def test_unknown_row_lists_the_rows(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, ""))
    with pytest.raises(ConfigError) as info:
        cfg.row("gpu")
    assert "cpu, tpu, cuda, neuron" in str(info.value)
    assert info.value.tip and "device-matrix list" in info.value.tip


def test_config_module_needs_only_the_standard_library() -> None:
    import ast

    tree = ast.parse(Path(config.__file__).read_text())
    imported = {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert imported <= {
        "__future__",
        "math",
        "os",
        "re",
        "shlex",
        "sys",
        "urllib",
        "collections",
        "configparser",
        "dataclasses",
        "importlib",
        "pathlib",
        "types",
        "typing",
        "tomllib",
        "tomli",
        "device_matrix",
    }


def test_each_run_of_a_script_gets_its_own_variant_and_two_alike_are_an_error(tmp_path: Path) -> None:
    runs = """
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/test_metrics.py"
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/test_metrics.py"
env = { XLA_METRICS_FILE = "/tmp/metrics.txt" }
[[tool.device-matrix.devices.cpu.scripts]]
file = "./test/test_metrics.py"
args = ["--verbosity=2"]
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/test_callback.py"
env = { XLA_USE_SPMD = "1" }
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/test_named.py"
name = "spmd"
"""
    scripts = config.load(write(tmp_path, runs)).row("cpu").scripts
    assert [s.variant for s in scripts] == ["", "XLA_METRICS_FILE", "--verbosity=2", "", "spmd"]

    # two runs that differ only in a value: they need a name each
    alike = """
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/x.py"
env = { CPU_NUM_DEVICES = "1" }
[[tool.device-matrix.devices.cpu.scripts]]
file = "test/x.py"
env = { CPU_NUM_DEVICES = "4" }
"""
    with pytest.raises(ConfigError) as err:
        config.load(write(tmp_path, alike))
    assert err.value.exit_code == EXIT_CONFIG
    assert "scripts" in err.value.message and "need other variable names, other arguments or a name each" in str(
        err.value.allowed or err.value.message
    )
    named = alike.replace('"1" }', '"1" }\nname = "one"').replace('"4" }', '"4" }\nname = "four"')
    assert [s.variant for s in config.load(write(tmp_path, named)).row("cpu").scripts] == ["one", "four"]
    with pytest.raises(ConfigError):
        config.load(write(tmp_path, named.replace('name = "one"', 'name = "12"')))  # unittest's own [2] form

    # two identical entries are one run, not two runs alike (#20: it runs once)
    twice = '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "test/x.py"\nargs = ["--a"]\n' * 2
    assert [s.variant for s in config.load(write(tmp_path, twice)).row("cpu").scripts] == ["", ""]
    twice += '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "test/x.py"\n'
    assert [s.variant for s in config.load(write(tmp_path, twice)).row("cpu").scripts] == ["--a", "--a", ""]
