"""Names that become folder names: a run's ``name``, a campaign's ``name``, a trial's id.

Each must be one plain path component, so that it lands inside the folder meant for it (a run
inside ``output_dir``, a trial inside ``<out>/trials``): letters, digits, ``.``, ``_`` and ``-``,
starting with a letter or a digit. That rules out ``..``, ``../x``, absolute paths, separators,
hidden names, spaces and control characters such as a newline.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PLAIN_NAME_RULE", "check_plain_name"]

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAX_CHARS = 200  # below the 255-byte file-name limit of common filesystems
PLAIN_NAME_RULE = (
    "one plain folder name: letters, digits, '.', '_', '-', starting with a letter or digit, "
    f"at most {_MAX_CHARS} characters (no '/', '..', absolute path, space or newline)"
)


def check_plain_name(value: Any, field: str) -> str:
    """``value`` if it is a plain folder name (see the module docstring), else ``ValueError``
    naming ``field``, the value and what is allowed."""
    if not isinstance(value, str) or not _PLAIN.fullmatch(value) or len(value) > _MAX_CHARS:
        raise ValueError(f"{field} {value!r} is not allowed; use {PLAIN_NAME_RULE}")
    return value
