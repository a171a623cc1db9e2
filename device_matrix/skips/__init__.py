"""Device skips and xfails: the model, the disable list, issue references, the static scan.

- :mod:`.model`: :class:`DeviceSkip` and the ``skip_device``/``xfail_device`` markers;
- :mod:`.by_design`: :func:`only_on`, for tests that do not apply on other devices;
- :mod:`.disable`: the central disable list;
- :mod:`.refs`: issue references in markers and in free text;
- :mod:`.scan`: what ``device-matrix skips list|check`` see, without importing the tests.
"""

from device_matrix.skips.by_design import (
    BY_DESIGN_COMMENT,
    BY_DESIGN_PREFIX,
    ONLY_ON_MARKER_HELP,
    is_by_design_text,
    only_on,
)
from device_matrix.skips.disable import disable_matches, load_disable_list
from device_matrix.skips.model import (
    BY_DESIGN_MARK,
    DeviceSkip,
    SkipMode,
    SkipSource,
    device_names,
    from_marker,
    pjrt_device_name,
)
from device_matrix.skips.refs import find_issue_in_text, normalize_issue
from device_matrix.skips.scan import (
    KNOWN_DEVICES,
    ScanFinding,
    attention,
    check,
    scan_file,
    scan_source,
    scan_tree,
    uncited,
)

__all__ = [
    "BY_DESIGN_COMMENT",
    "BY_DESIGN_MARK",
    "BY_DESIGN_PREFIX",
    "KNOWN_DEVICES",
    "ONLY_ON_MARKER_HELP",
    "DeviceSkip",
    "ScanFinding",
    "SkipMode",
    "SkipSource",
    "attention",
    "check",
    "device_names",
    "disable_matches",
    "find_issue_in_text",
    "from_marker",
    "is_by_design_text",
    "load_disable_list",
    "normalize_issue",
    "only_on",
    "pjrt_device_name",
    "scan_file",
    "scan_source",
    "scan_tree",
    "uncited",
]
