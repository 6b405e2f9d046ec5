"""Names that become folder names: a run's ``name``, a campaign's ``name``, a trial's id.

Each must be one plain path component, so that it lands inside the folder meant for it (a run
inside ``output_dir``, a trial inside ``<out>/trials``): letters, digits, ``.``, ``_`` and ``-``,
starting with a letter or a digit. That rules out ``..``, ``../x``, absolute paths, separators,
hidden names, spaces and control characters such as a newline. The rule lives in
:func:`powerzoo.fileio.check_plain_name` (offline dataset ids use it too).
"""

from __future__ import annotations

from powerzoo.fileio import PLAIN_NAME_RULE, check_plain_name

__all__ = ["PLAIN_NAME_RULE", "check_plain_name"]
