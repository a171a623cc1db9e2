"""Crashes placed by environment (#25): the facets of a snapshot, and which of them separate
the runs where a crash happened from the runs where its test passed."""

from __future__ import annotations

import math

import pytest

from device_matrix.diagnostics.environment import facets
from device_matrix.report.placement import Observation, place

T4 = {"accelerator": "Tesla T4", "driver": "535.104.05", "python": "3.10.12"}
A100 = {"accelerator": "NVIDIA A100-SXM4-40GB", "driver": "550.54.15", "python": "3.10.12"}


def _obs(env: dict[str, str], crashed: bool, n: int, row: str = "cuda", **extra: str) -> list[Observation]:
    return [Observation(row, {**env, **{k: v.format(i=i) for k, v in extra.items()}}, crashed) for i in range(n)]


def test_facets_of_a_cuda_snapshot() -> None:
    env = {
        "drivers": {
            "nvidia-smi": "Tesla T4, 535.104.05, 15360 MiB\nTesla T4, 535.104.05, 15360 MiB",
            "nvidia-smi-cuda": "=====NVSMI LOG=====\nDriver Version : 535.104.05\nCUDA Version : 12.2\n",
        },
        "packages": {"torch": "2.7.0+cu126", "torch_xla": "2.7.0"},
        "host": "gpu-1",
        "python": "3.10.12",
        "container_image": "xla:r2.7.0_3.10_cuda_12.6",
    }
    assert facets(env) == {
        "accelerator": "2x Tesla T4",
        "driver": "535.104.05",
        "cuda": "12.2",
        "cuda_runtime": "12.6",
        "torch": "2.7.0+cu126",
        "torch_xla": "2.7.0",
        "image": "xla:r2.7.0_3.10_cuda_12.6",
        "host": "gpu-1",
        "python": "3.10.12",
    }


def test_facets_of_neuron_tpu_and_older_snapshots() -> None:
    neuron = {"drivers": {"neuron-ls": "instance-type: trn1.2xlarge\n+----+"}, "neuron_driver": "2.19.64.0"}
    assert facets(neuron) == {"accelerator": "Neuron trn1.2xlarge", "driver": "neuron 2.19.64.0"}
    tpu = {"variables": {"TPU_ACCELERATOR_TYPE": "v5litepod-8"}, "packages": {"libtpu": "0.0.17"}}
    assert facets(tpu) == {"accelerator": "TPU v5litepod-8", "libtpu": "0.0.17"}
    # a failed tool, a free-form or empty snapshot: nothing invented
    assert facets({"drivers": {"nvidia-smi": "exit 9: NVIDIA-SMI has failed"}}) == {}
    assert facets({"drivers": "odd", "packages": ["x"], "host": True}) == {}
    assert facets({}, image="img:1") == {"image": "img:1"}
    long = facets({"host": "h" * 1000})
    assert len(long["host"]) == 200


def test_a_crash_on_one_accelerator_is_placed_there_with_its_counts() -> None:
    obs = [*_obs(T4, True, 12, host="t4-{i}"), *_obs(A100, False, 9, host="a100-{i}")]
    obs += _obs({"python": "3.11"}, False, 30, row="cpu")
    p = place("fp", obs)
    assert p["crashes"] == 12 and p["passes"] == 9 and p["rows"] == ["cuda"] and p["clean_rows"] == [["cpu", 30]]
    assert [s["facet"] for s in p["separating"]] == ["accelerator", "driver"]
    assert p["text"].startswith(
        "12 of 12 crashes on Tesla T4 / driver 535.104.05 (12 of 12 runs there crashed); "
        "0 of 9 runs elsewhere crashed (9 on NVIDIA A100-SXM4-40GB)"
    )
    assert "its tests passed on cpu (30 run(s)) and never crashed there" in p["text"]
    # the chance of all 12 crashes landing on the 12 T4 runs of 21: 1 / comb(21, 12)
    assert p["separating"][0]["chance"] == pytest.approx(1 / math.comb(21, 12))
    # every host crashed once: hosts, unique per runner, never "separate"
    assert "host" not in p["also"]


def test_a_crash_that_happens_on_every_accelerator_is_placed_nowhere() -> None:
    obs = [*_obs(T4, True, 4), *_obs(T4, False, 4), *_obs(A100, True, 3), *_obs(A100, False, 5)]
    p = place("fp", obs)
    assert p["separating"] == [] and p["text"].startswith("nothing separates the 7 crashes from the 9 passing runs")


def test_a_crash_more_frequent_on_one_value_is_placed_there_with_its_rate() -> None:
    obs = [*_obs(T4, True, 8), *_obs(T4, False, 4), *_obs(A100, False, 12)]
    p = place("fp", obs)
    assert p["separating"][0]["values"] == ["Tesla T4"]
    assert "8 of 8 crashes on Tesla T4 / driver 535.104.05 (8 of 12 runs there crashed)" in p["text"]


def test_too_few_crashes_or_no_pass_is_said_as_such() -> None:
    assert "too few to place" in place("fp", [*_obs(T4, True, 1), *_obs(A100, False, 9)])["text"]
    assert "no passing run there" in place("fp", _obs(T4, True, 5))["text"]


def test_chance_alone_is_not_a_separation() -> None:
    # two crashes on T4 among many T4 runs, A100 passing: could be luck
    obs = [*_obs(T4, True, 2), *_obs(T4, False, 20), *_obs(A100, False, 3)]
    assert place("fp", obs)["separating"] == []


def test_a_crash_on_an_unknown_value_cannot_be_placed_by_that_facet() -> None:
    obs = [*_obs(T4, True, 5), *_obs({"python": "3.10.12"}, True, 2), *_obs(A100, False, 9)]
    p = place("fp", obs)
    assert all(s["facet"] not in ("accelerator", "driver") for s in p["separating"])
