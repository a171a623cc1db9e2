"""Device markers mean the same under plain pytest as under device-matrix (#20).

The part of these tests that starts no process; the rest is in tests/integration/test_markers_plain_pytest.py (#41)."""

from __future__ import annotations

from device_matrix.skips import DeviceSkip, device_names


def test_device_names() -> None:
    assert device_names("cpu", "CPU") == {"cpu"}
    assert device_names(None, "GPU") == {"gpu", "cuda"}
    assert device_names("a100", "CUDA") == {"a100", "cuda"}
    assert device_names(None, " ") == frozenset()
    skip = DeviceSkip(mode="skip", devices=("cuda",), issue="#1", reason="", source="marker")
    assert skip.applies_to(None, "GPU")
    assert skip.applies_to("a100", "CUDA")
    assert not skip.applies_to("cpu", "CPU")
