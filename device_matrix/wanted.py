"""How the child reads a test's name, and which collected tests a run was asked for: one
rule for the runner and the child, light enough for the child to import at its start.

A raw name may copy another test's placeholder (#30: a parametrize id ``[redacted:1042b4]``,
public in every artifact): where nodeids are first read (the child's journal writer), each
``[redacted`` of a raw one is written ``[redacted\\``, so no raw name reads as a placeholder
and no two raw names become one. That escaped name is the test's name from then on: in
the runner, the record (redacted as an identifier, :mod:`device_matrix.redact`) and
``--test``.

A run names its tests by their raw nodeids (``--test``) or by the nodeids a record on disk
holds (a shard's plan, the record a resume continues, a crash's rerun); pytest and the
script launcher collect them raw. :func:`selected` matches the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from device_matrix.redact import Redactor

LOOKALIKE = "[redacted"  # how every placeholder starts (redact.PLACEHOLDER_RE)
ESCAPED = "[redacted\\"


def escape_ident(raw: str) -> str:
    """A raw identifier (a nodeid as pytest names it) as it is read: no placeholder in it."""
    return raw.replace(LOOKALIKE, ESCAPED)


def escape_nodeids(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A journal event's fields with its ``nodeid`` and ``nodeids`` escaped (:func:`escape_ident`)."""
    out = dict(fields)
    if isinstance(out.get("nodeid"), str):
        out["nodeid"] = escape_ident(out["nodeid"])
    if isinstance(out.get("nodeids"), list):
        out["nodeids"] = [escape_ident(n) if isinstance(n, str) else n for n in out["nodeids"]]
    return out


def selected(
    nodeids: Iterable[str], wanted: Sequence[str], redactor: Redactor | None = None, *, read: bool = False
) -> dict[str, int]:
    """Which of ``nodeids`` (as collected) ``wanted`` names, each with its place in ``wanted``.

    ``wanted`` names a test by its raw nodeid, or by the nodeid a record on disk holds: each
    collected nodeid is escaped (``read``: the runner's, escaped already by the child's
    journal) and then redacted as an identifier, as that record's writer did, to find it.
    Without a placeholder or an escape in ``wanted`` nothing is redacted; a raw nodeid that
    looks like a placeholder is found only by its escaped name.
    """
    position = {n: k for k, n in enumerate(wanted)}
    by_record = any(LOOKALIKE in n for n in wanted)
    found: dict[str, int] = {}
    for nodeid in nodeids:
        name = nodeid if read else escape_ident(nodeid)
        k = position.get(name)
        if k is None and by_record:
            if redactor is None:
                from device_matrix.redact import Redactor  # only here: the child starts without it

                redactor = Redactor()
            k = position.get(redactor.ident(name))
        if k is not None:
            found[nodeid] = k
    return found
