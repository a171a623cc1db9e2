"""TOML files read with the standard library (``tomli`` on Python 3.10), for config and skips alike.

Every problem with a file (missing permissions, not UTF-8, not TOML, nested too deeply)
is a :class:`~device_matrix.errors.ConfigError` that names the file and says what to do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from device_matrix.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def loads(text: str) -> dict[str, Any]:
    """``text`` as TOML (text this package ships: an error in it is a bug, and raises as it is)."""
    return tomllib.loads(text)


def read(path: Path) -> dict[str, Any]:
    """The TOML file at ``path``; a ConfigError that names it when it cannot be read or parsed."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=str(path), tip="Fix the syntax error shown.") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start})", source=str(path), tip="TOML files are UTF-8; save it as UTF-8."
        ) from None
    except RecursionError:
        raise ConfigError("nested too deeply", source=str(path), tip="Flatten the arrays and tables.") from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read: {exc.strerror or exc}", source=str(path), tip="Check that the file is readable."
        ) from None


def read_array_of_tables(path: Path, key: str) -> list[Any]:
    """The ``[[key]]`` tables of a TOML file, [] when the file is missing.

    Any other top-level key, or ``key`` not being an array of tables, is a ConfigError.
    """
    if not path.is_file():
        return []
    data = read(path)
    entries = data.get(key, [])
    extra = set(data) - {key}
    if extra or not isinstance(entries, list):
        raise ConfigError(
            f"unknown top-level key(s) {sorted(extra)}" if extra else f"{key} must be [[{key}]] tables",
            source=str(path),
            allowed=f"[[{key}]] tables",
        )
    return entries
