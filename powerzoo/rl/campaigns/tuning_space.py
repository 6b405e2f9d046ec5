"""The published search spaces of the tuner: reading an algorithm's entry of
``configs/tuning/search_spaces.yaml`` (format in the file's header) and drawing settings from it
with a seeded sampler."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

__all__ = ["SEARCH_SPACES_FILE", "load_search_space", "sample_configurations"]

SEARCH_SPACES_FILE = (
    Path(__file__).resolve().parents[3] / "configs" / "tuning" / "search_spaces.yaml"
)
"""The published search spaces (the repository's ``configs/tuning/search_spaces.yaml``)."""

_KINDS = ("log_uniform", "uniform", "choice")


def _check_parameter(algorithm: str, name: str, spec: Any) -> dict[str, Any]:
    where = f"search space of {algorithm}, {name}"
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in _KINDS:
        raise ValueError(f"{where}: give one of {', '.join(_KINDS)}, got {spec!r}")
    kind, values = next(iter(spec.items()))
    if not isinstance(values, list) or not values:
        raise ValueError(f"{where}: {kind} takes a non-empty list, got {values!r}")
    if kind != "choice":
        if len(values) != 2 or not all(isinstance(v, (int, float)) for v in values):
            raise ValueError(f"{where}: {kind} takes [low, high], got {values!r}")
        low, high = (float(v) for v in values)
        if not low < high or (kind == "log_uniform" and low <= 0):
            raise ValueError(f"{where}: {kind} needs 0 < low < high (log) or low < high")
    return {kind: list(values)}


def load_search_space(algorithm: str, path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The search space of ``algorithm``: ``{parameter: {kind: values}}`` in file order, with
    ``same_as`` resolved and a reference baseline falling back to its base algorithm's entry.

    Args:
        algorithm: An algorithm name (any case), or an entry point ``package.module:Class`` (as
            written; its entry may say ``same_as: PPO``).
        path: The search-space YAML file (default :data:`SEARCH_SPACES_FILE`).

    Returns:
        The parameters and their distributions; ``ValueError`` for an algorithm the file lacks
        or a malformed entry, ``FileNotFoundError`` without the file.
    """
    from powerzoo.rl.algorithms import base_algorithm
    from powerzoo.rl.entry_points import is_entry_point

    def key(name: Any) -> str:  # an entry point is code, kept as written; names are any case
        return name if is_entry_point(name) else str(name).upper()

    path = Path(SEARCH_SPACES_FILE if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(f"no search-space file at {path} (pass one with --space)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: a search-space file maps algorithm names to their spaces")
    name = key(algorithm)
    if name not in data:
        name = base_algorithm(name)
    if name not in data:
        raise ValueError(f"{path}: no search space for {algorithm}; it has {', '.join(data)}")
    seen: list[str] = []
    space: dict[str, dict[str, Any]] = {}
    while name is not None:
        if name in seen or name not in data or not isinstance(data[name], Mapping):
            raise ValueError(f"{path}: search space {name!r} is missing or loops ({seen})")
        seen.append(name)
        entry = dict(data[name])
        parent = entry.pop("same_as", None)
        space = {**{k: _check_parameter(name, k, v) for k, v in entry.items()}, **space}
        name = None if parent is None else key(parent)
    return space


def _draw(rng: np.random.Generator, spec: Mapping[str, Any]) -> Any:
    kind, values = next(iter(spec.items()))
    if kind == "choice":
        return values[int(rng.integers(len(values)))]
    low, high = float(values[0]), float(values[1])
    value = (
        math.exp(rng.uniform(math.log(low), math.log(high)))
        if kind == "log_uniform"
        else (rng.uniform(low, high))
    )
    return float(f"{value:.4g}")  # four significant digits: readable, and exact in YAML


def sample_configurations(
    space: Mapping[str, Mapping[str, Any]], n: int, seed: int = 0
) -> list[dict[str, Any]]:
    """``n`` settings drawn independently from ``space`` (floats kept to 4 significant digits);
    the same ``seed`` draws the same settings.

    Args:
        space: ``{parameter: {kind: values}}`` (:func:`load_search_space`).
        n: Number of settings.
        seed: Seed of the sampler.

    Returns:
        One ``{parameter: value}`` per setting (dotted names not yet nested).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of configurations must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    return [{name: _draw(rng, spec) for name, spec in space.items()} for _ in range(n)]
