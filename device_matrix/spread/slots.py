"""The device slots of one host: the variables that give a process slot S's device (#23)."""

from __future__ import annotations

from device_matrix.config import Row

BASE_PORT = 8476  # {port} in slot_env: one port per slot from here (TPU_PROCESS_PORT's default)


def slot_env(row: Row, slot: int) -> dict[str, str]:
    """The row's ``slot_env`` for device slot ``slot`` (0-based)."""
    return {name: value.format(slot=slot, port=BASE_PORT + slot) for name, value in row.slot_env.items()}
