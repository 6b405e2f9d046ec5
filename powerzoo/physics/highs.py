"""HiGHS solvers that write nothing on standard output: :func:`new_highs`.

Every HiGHS model of the package (the physics solvers and the tasks' oracles) is created here.
highspy's ``Highs()`` prints HiGHS's banner ("Running HiGHS <version> ... Copyright ...") on
the process's standard output while it is being built: its constructor registers the Python
callbacks, which is the first HiGHS call that logs, before any option can be set. A program
whose standard output is data (``powerzoo describe --json``) would then print invalid JSON.
:func:`new_highs` switches HiGHS's output off before that call, so that nothing of HiGHS reaches
standard output; with ``log=True`` the solver's log goes to standard error instead. highspy is
imported lazily (when the first solver is created).
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import highspy

__all__ = ["new_highs"]

# options that would send HiGHS's log to standard output: chosen through ``log`` instead
_OUTPUT_OPTIONS = ("output_flag", "log_to_console")


@functools.cache
def _quiet_highs_class() -> type[highspy.Highs]:
    """A :class:`highspy.Highs` subclass whose output is off before its first logging call."""
    import highspy

    class QuietHighs(highspy.Highs):
        """:class:`highspy.Highs` that is silent from its construction on."""

        _silenced = False

        def enableCallbacks(self) -> None:  # noqa: N802 (highspy's method name)
            """Turn HiGHS's output off (once, first thing), then register the callbacks."""
            if not self._silenced:
                self._silenced = True
                self.setOptionValue("output_flag", False)
            super().enableCallbacks()

    return QuietHighs


def _log_to_stderr(event: Any) -> None:
    """Write one message of HiGHS's log (a logging-callback event) on standard error."""
    sys.stderr.write(event.message)


def new_highs(log: bool = False, **options: bool | int | float | str) -> highspy.Highs:
    """A new, empty :class:`highspy.Highs` with ``options`` set, silent on standard output.

    ``options``: HiGHS option names and values, set in the given order (e.g. ``presolve="off"``,
    ``time_limit=10.0`` in seconds, ``mip_rel_gap=1e-4`` as a fraction). ``log``: ``False``
    (the default) keeps HiGHS silent; ``True`` writes its log on standard error. Raises
    ``ValueError`` for an option HiGHS refuses, and for ``output_flag`` / ``log_to_console``
    (which would put the log on standard output: pass ``log=True``).
    """
    import highspy

    refused = [name for name in _OUTPUT_OPTIONS if name in options]
    if refused:
        raise ValueError(
            f"new_highs: option {refused[0]!r} is set by new_highs itself (it would print "
            "HiGHS's log on standard output); pass log=True to get the log on standard error"
        )
    h = _quiet_highs_class()()
    h.setOptionValue("output_flag", False)  # also when highspy's constructor did not log
    if log:
        h.setOptionValue("log_to_console", False)
        h.cbLogging += _log_to_stderr
        h.setOptionValue("output_flag", True)
    for name, value in options.items():
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise ValueError(
                f"new_highs: HiGHS refused option {name}={value!r}; expected a HiGHS option "
                "name with a value of its type (see HiGHS's option list)"
            )
    return h
