"""Small checks shared by the campaign file's parsers: one-line :class:`~.spec.CampaignError`
messages naming the file and the offending key."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from powerzoo.rl.campaigns.spec import CampaignError

__all__ = ["fail", "reject_outside", "check_keys"]


def fail(where: str, message: str) -> CampaignError:
    """The error ``"<where>: <message>"`` (raise it)."""
    return CampaignError(f"{where}: {message}")


def reject_outside(
    where: str, values: Iterable[Any], allowed: Collection[Any], before: str, after: str = ""
) -> None:
    """``CampaignError`` ``before`` + the values outside ``allowed`` (their reprs, in order) +
    ``after``, if there are any."""
    outside = [v for v in values if v not in allowed]
    if outside:
        raise fail(where, f"{before}{', '.join(map(repr, outside))}{after}")


def check_keys(where: str, section: Any, allowed: set[str], field: str) -> dict[str, Any]:
    """``section`` (a mapping, ``None``: empty) as a dict; ``CampaignError`` naming ``field``
    for another type or a key outside ``allowed``."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise fail(where, f"'{field}' must be a mapping, got {type(section).__name__}")
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise fail(
            where,
            f"unknown key(s) {', '.join(repr(f'{field}.{k}') for k in unknown)}; "
            f"valid: {', '.join(sorted(allowed))}",
        )
    return dict(section)
