"""Operable ratings: re-rating the branches that no dispatch can keep within their ratings.

Several library cases publish ratings that no dispatch respects at the load the dispatch tasks
put on them (the case's bus loads times ``load_scale = 1.1`` times the calendar demand shape):
with hard limits their DC-OPF is infeasible, so an overload budget could never be met and every
score would be noise (``case1354pegase``: 1,851 MW of overload on 38 branches at the peak).
:func:`operable_rerating` checks a case at the two ends of that load and re-rates what binds.

The rule
--------
1. **Load levels**: every bus load times :data:`TROUGH_LOAD_SCALE` (0.45) and times
   :data:`PEAK_LOAD_SCALE` (1.1). The tasks' load is ``1.1 x demand_pu`` with ``demand_pu``
   scaled so the base scenario's annual peak is 1.0 (its half-hour values lie in 0.422-0.995),
   so every half-hour of the base scenario lies between the two levels.
2. **Operating point**: the DC-OPF at each level with soft line limits priced at
   :data:`OVERLOAD_PRICE_PER_MWH` (2,000 $/MWh, the tasks' overload price): the least-cost
   dispatch that relieves every overload redispatch can relieve at that price, i.e. the dispatch
   the tasks' oracle picks there.
3. **Re-rating**: every branch still above its rating in that operating point (by more than
   :data:`OVERLOAD_TOL_MW`) is re-rated to :data:`RERATE_FACTOR` (1.15) times the largest
   ``|flow|`` it carries at the two levels, rounded up to 0.1 MW; the others keep their ratings.
   Steps 2-3 repeat (at most :data:`MAX_ROUNDS` rounds) until no branch is above its rating.

Why this holds between the levels: the loads are one scalar times fixed bus shares, and the set
of scalars for which the hard-limit DC-OPF is feasible is an interval (the projection of a
polyhedron), so a case feasible at 0.45 and at 1.1 is feasible at every load in between. The
re-rated branches keep a 15 % margin over the flow of the operating point that set them.

Why the DC-OPF flow and not an AC-OPF flow: the tasks that use these ratings measure overload on
DC flows, so the DC flow is the one the budget counts; an AC-OPF on thousands of buses (the
cases that need re-rating) is not available offline without a solver whose convergence on them
is not dependable (pandapower's interior-point ``runopp``), and its MVA flows add reactive power
the DC tasks never see.

A level whose load the units cannot meet (``sum Pmin > load`` or ``sum Pmax < load``: no rating
helps) is reported as inadequate and replaced by the nearest load they can meet (``sum Pmin`` or
``sum Pmax``), so the check still covers every load between the levels that the units can
serve; a case with islands or a solver failure is reported and left as it is.

The check is deterministic (HiGHS, fixed inputs) and runs once per case build:
:func:`powerzoo.physics.cases.load_case` checks every transmission case at its own ratings and
stores the result in its disk cache; ratings by voltage class
(:func:`powerzoo.physics.line_ratings.with_voltage_class_ratings`) are checked when they are
assigned. :func:`rerating_of` gives a loaded case's :class:`Rerating` (the branches, their old
and new ratings and the flows that set them).

Both check the case with its own unit limits (Pmin mostly 0 in the library cases). A task that
gives the units other limits checks again with them: the dispatch tasks run
:func:`with_operable_ratings` on the case with their Pmin by technology at their own lowest and
peak load (:func:`powerzoo.tasks.economic_dispatch.sced.limited_case`; case300 has 6 more
branches re-rated there, case118 none).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import weakref

import numpy as np

from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.network import NetworkCase

__all__ = [
    "MAX_ROUNDS",
    "OVERLOAD_PRICE_PER_MWH",
    "OVERLOAD_TOL_MW",
    "PEAK_LOAD_SCALE",
    "RERATE_FACTOR",
    "TROUGH_LOAD_SCALE",
    "Rerating",
    "apply_rerating",
    "operable_rerating",
    "rerating_of",
    "with_operable_ratings",
    "without_rerating",
]

PEAK_LOAD_SCALE = 1.1  # x the case's bus loads: the tasks' load at the year's peak
TROUGH_LOAD_SCALE = 0.45  # x the case's bus loads: below the year's lowest half-hour (0.464)
RERATE_FACTOR = 1.15  # new rating / |flow| of the operating point (the 1.1-1.2 band's middle)
OVERLOAD_PRICE_PER_MWH = 2000.0  # soft-limit price of the operating point [$/MWh]
OVERLOAD_TOL_MW = 1e-3  # overload below this is solver tolerance, not overload [MW]
MAX_ROUNDS = 5  # operating point / re-rating rounds

_LOG = logging.getLogger(__name__)
_RECORDS: weakref.WeakKeyDictionary[NetworkCase, Rerating] = weakref.WeakKeyDictionary()
_PREFIX = "__rerating_"


@dataclasses.dataclass(frozen=True, eq=False)
class Rerating:
    """What :func:`operable_rerating` found and changed on one case.

    Attributes:
        case: the case name.
        basis: where the ratings it checked came from (``"case"``: the published ones;
            ``"voltage class"``: :mod:`powerzoo.physics.line_ratings`).
        load_scales: the load levels asked for [L], multiples of the case's bus loads.
        adequate: [L] the units can meet the level's load (``sum Pmin <= load <= sum Pmax``).
        checked_scales: [L] the levels solved: ``load_scales``, or where inadequate the nearest
            load the units can meet (NaN if they can meet none).
        overload_before_mw: [L] total overload of the operating point at the checked ratings
            [MW] (NaN where not solved).
        overload_after_mw: [L] the same after re-rating [MW] (0 where operable).
        branch: [k] positions of the re-rated branches.
        old_rating_mw: [k] their ratings before [MW].
        new_rating_mw: [k] their ratings after [MW].
        flow_mw: [k] the largest ``|flow|`` of the operating point that set them [MW].
        note: why the check could not run (islands, solver failure), else ``""``.
    """

    case: str
    basis: str
    load_scales: np.ndarray
    adequate: np.ndarray
    checked_scales: np.ndarray
    overload_before_mw: np.ndarray
    overload_after_mw: np.ndarray
    branch: np.ndarray
    old_rating_mw: np.ndarray
    new_rating_mw: np.ndarray
    flow_mw: np.ndarray
    note: str = ""

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n_rerated(self) -> int:
        """Number of re-rated branches."""
        return int(self.branch.size)

    @property
    def operable(self) -> bool:
        """True if the ratings hold at every checked level: no overload left after re-rating
        (the units' adequacy is :attr:`adequate`)."""
        after = np.nan_to_num(self.overload_after_mw, nan=np.inf)
        return not self.note and bool((after <= OVERLOAD_TOL_MW).all())

    def summary(self) -> str:
        """One line: what was checked and what changed (the loader's log line)."""
        levels = "/".join(f"{s:g}" for s in self.load_scales)
        head = f"{self.case} ({self.basis} ratings, load x {levels})"
        if self.note:
            return f"{head}: not checked ({self.note})"
        parts = []
        if self.n_rerated:
            before = ", ".join(
                f"{mw:,.1f} MW at x {s:g}"
                for s, mw in zip(self.checked_scales, self.overload_before_mw, strict=True)
                if mw > OVERLOAD_TOL_MW
            )
            parts.append(
                f"{self.n_rerated} branches re-rated to {RERATE_FACTOR:g} x their DC-OPF flow "
                f"(overload before: {before})"
            )
        else:
            parts.append("no branch re-rated")
        for asked, solved in zip(
            self.load_scales[~self.adequate], self.checked_scales[~self.adequate], strict=True
        ):
            parts.append(f"units cannot meet the load at x {asked:g} (checked at x {solved:.4g})")
        parts.append("operable" if self.operable else "NOT operable")
        return f"{head}: " + "; ".join(parts)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The record as named arrays (for a cache file)."""
        return {
            _PREFIX + f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Rerating:
        """The record :meth:`to_arrays` wrote; ``ValueError`` if an entry is missing or bad."""
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            key = _PREFIX + f.name
            if key not in arrays:
                raise ValueError(f"{key} missing")
            value = arrays[key]
            values[f.name] = str(value) if f.name in ("case", "basis", "note") else value
        record = cls(**values)  # type: ignore[arg-type]
        n_levels, k = record.load_scales.shape, record.branch.shape
        for name in ("adequate", "checked_scales", "overload_before_mw", "overload_after_mw"):
            if getattr(record, name).shape != n_levels:
                raise ValueError(f"{name} has shape {getattr(record, name).shape}")
        for name in ("old_rating_mw", "new_rating_mw", "flow_mw"):
            if getattr(record, name).shape != k:
                raise ValueError(f"{name} has shape {getattr(record, name).shape}")
        if record.branch.dtype.kind != "i":
            raise ValueError(f"branch is {record.branch.dtype}, not integer")
        return record

    @staticmethod
    def keys() -> tuple[str, ...]:
        """The names :meth:`to_arrays` writes."""
        return tuple(_PREFIX + f.name for f in dataclasses.fields(Rerating))


def _overload(case: NetworkCase, loads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Soft-limit DC-OPF at ``loads`` [L, n_bus]: ``(slack [L, n_branch], |flow| [L, n_branch])``
    [MW]; ``RuntimeError`` unless every row is optimal."""
    result = solve_dc_opf(case, loads, soft_line_penalty=OVERLOAD_PRICE_PER_MWH)
    status = np.atleast_1d(result.status)
    if not (status == "optimal").all():
        raise RuntimeError(f"DC-OPF status {sorted(set(status.tolist()))}")
    return np.atleast_2d(result.line_slack_mw), np.abs(np.atleast_2d(result.branch_flow_mw))


def _servable(case: NetworkCase, scales: np.ndarray) -> np.ndarray:
    """``scales``, each moved to the nearest load the units can meet (``sum Pmin`` .. ``sum
    Pmax``, a millionth inside); NaN where they can meet none."""
    pmin, pmax = case.gen_limits_mw
    total = case.total_load_mw
    if total <= 0.0:
        return np.full(scales.shape, np.nan)
    low, high = pmin.sum() / total, pmax.sum() / total
    if low > high:
        return np.full(scales.shape, np.nan)
    inside = (scales >= low) & (scales <= high)
    moved = np.clip(scales, low * (1.0 + 1e-6), high * (1.0 - 1e-6))
    return np.where(inside, scales, moved)


def operable_rerating(
    case: NetworkCase,
    basis: str = "case",
    load_scales: tuple[float, ...] = (TROUGH_LOAD_SCALE, PEAK_LOAD_SCALE),
) -> Rerating:
    """Check ``case`` at ``load_scales`` x its bus loads and re-rate what binds (module
    docstring); the case itself is not changed (:func:`apply_rerating` does).

    Args:
        case: The transmission case, with the ratings to check [MW].
        basis: Where those ratings come from (reported in :class:`Rerating`).
        load_scales: Load levels, multiples of the case's bus loads.

    Returns:
        The :class:`Rerating` (empty when nothing binds).
    """
    scales = np.asarray(load_scales, dtype=float)
    checked = _servable(case, scales)
    adequate = checked == scales
    before = np.full(scales.size, np.nan)
    after = np.full(scales.size, np.nan)
    none = np.zeros(0)
    record = Rerating(
        case=case.name,
        basis=basis,
        load_scales=scales,
        adequate=adequate,
        checked_scales=checked,
        overload_before_mw=before.copy(),
        overload_after_mw=after.copy(),
        branch=np.zeros(0, dtype=np.int64),
        old_rating_mw=none,
        new_rating_mw=none,
        flow_mw=none,
    )
    levels = np.flatnonzero(np.isfinite(checked))
    if levels.size == 0:
        return dataclasses.replace(record, note="the units can meet no load level")
    loads = checked[levels, None] * case.bus_pd_mw
    rating = case.branch_rate_a_mw.astype(float)
    old, flow_set = {}, {}
    current = case
    try:
        for round_ in range(MAX_ROUNDS + 1):
            slack, flow = _overload(current, loads)
            total = slack.sum(axis=1)
            if round_ == 0:
                before[levels] = total
            after[levels] = total
            over = np.flatnonzero((slack > OVERLOAD_TOL_MW).any(axis=0))
            if over.size == 0 or round_ == MAX_ROUNDS:
                break
            peak_flow = flow[:, over].max(axis=0)
            for k, f in zip(over.tolist(), peak_flow.tolist(), strict=True):
                old.setdefault(k, float(case.branch_rate_a_mw[k]))
                flow_set[k] = f
                rating[k] = math.ceil(RERATE_FACTOR * f * 10.0) / 10.0
            current = dataclasses.replace(case, branch_rate_a_mw=rating.copy())
    except (RuntimeError, ValueError) as err:
        note = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        return dataclasses.replace(record, note=note)
    branch = np.array(sorted(old), dtype=np.int64)
    return dataclasses.replace(
        record,
        overload_before_mw=before,
        overload_after_mw=after,
        branch=branch,
        old_rating_mw=np.array([old[k] for k in branch.tolist()]),
        new_rating_mw=rating[branch],
        flow_mw=np.array([flow_set[k] for k in branch.tolist()]),
    )


def apply_rerating(case: NetworkCase, record: Rerating) -> NetworkCase:
    """``case`` with the new ratings of ``record`` (``case`` itself when it re-rates nothing);
    the result is registered for :func:`rerating_of`."""
    if record.case != case.name:
        raise ValueError(f"re-rating of {record.case!r} applied to {case.name!r}")
    out = case
    if record.n_rerated:
        rating = case.branch_rate_a_mw.copy()
        rating[record.branch] = record.new_rating_mw
        out = dataclasses.replace(case, branch_rate_a_mw=rating)
        _LOG.info("operable ratings: %s", record.summary())
    _RECORDS[out] = record
    return out


def with_operable_ratings(
    case: NetworkCase,
    basis: str = "case",
    load_scales: tuple[float, ...] = (TROUGH_LOAD_SCALE, PEAK_LOAD_SCALE),
) -> NetworkCase:
    """``case`` checked at ``load_scales`` x its bus loads and re-rated by
    :func:`operable_rerating` (:func:`apply_rerating`).

    Args:
        case: The transmission case, with the ratings [MW] and unit limits to check.
        basis: Where those ratings come from (reported in :class:`Rerating`).
        load_scales: Load levels, multiples of the case's bus loads.

    Returns:
        The re-rated case, registered for :func:`rerating_of` (``case`` itself when nothing
        binds).
    """
    return apply_rerating(case, operable_rerating(case, basis, load_scales))


def rerating_of(case: NetworkCase) -> Rerating | None:
    """The :class:`Rerating` behind ``case`` (a case returned by
    :func:`~powerzoo.physics.cases.load_case`, or by
    :func:`~powerzoo.physics.line_ratings.with_voltage_class_ratings`), ``None`` if it was not
    checked (a case built by hand, or changed after loading)."""
    return _RECORDS.get(case)


def without_rerating(case: NetworkCase) -> NetworkCase:
    """``case`` with the ratings its check started from (the re-rated branches back at their
    old ratings): the case as published, for measuring what the re-rating changed. ``case``
    itself when nothing was re-rated or it was not checked."""
    record = rerating_of(case)
    if record is None or not record.n_rerated:
        return case
    rating = case.branch_rate_a_mw.copy()
    rating[record.branch] = record.old_rating_mw
    return dataclasses.replace(case, branch_rate_a_mw=rating)
