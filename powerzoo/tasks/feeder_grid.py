"""The feeder model of the distribution-feeder tasks (:class:`FeederModel`): the bus loads of
any step, the step's exact AC power flow and its grid costs and info keys, as
:mod:`powerzoo.tasks.feeder` describes them (re-exported there).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data.profiles import Profiles
from powerzoo.physics.cases import load_case
from powerzoo.physics.feeder import RadialFeeder
from powerzoo.physics.radial_pf import solve_flow
from powerzoo.scratch import Scratch

__all__ = [
    "V_MIN_PU",
    "V_MAX_PU",
    "NONCONVERGED_VOLTAGE_PU_PER_BUS",
    "PF_MAX_ITER",
    "PF_TOL_PU",
    "GridStep",
    "FeederModel",
    "row_sum",
]

V_MIN_PU, V_MAX_PU = 0.95, 1.05  # voltage band (ANSI C84.1 range A, EN 50160 +-5 %)
NONCONVERGED_VOLTAGE_PU_PER_BUS = 0.1  # voltage_violation charged per bus when the flow fails
PF_MAX_ITER = 30  # sweeps per step; a 33-bus flow converges in under 10 (1 to 4 warm-started)
PF_TOL_PU = 1e-8

# the reductions without ndarray.sum's / .min's Python wrappers
_add_reduce, _min_reduce, _max_reduce = np.add.reduce, np.minimum.reduce, np.maximum.reduce


def _lowest(x: np.ndarray) -> Any:
    """The smallest entry of ``x`` [B] (NaN if any is; read directly for one row)."""
    return x[0] if x.shape[0] == 1 else _min_reduce(x)


def _highest(x: np.ndarray) -> Any:
    """The largest entry of ``x`` [B] (NaN if any is; read directly for one row)."""
    return x[0] if x.shape[0] == 1 else _max_reduce(x)


def row_sum(x: np.ndarray) -> np.ndarray:
    """``x.sum(axis=1)`` (the same sums) without the method's Python wrapper."""
    return _add_reduce(x, axis=1)


@dataclasses.dataclass(frozen=True)
class GridStep:
    """One power flow of a batch and what the tasks take from it (arrays with leading axis
    ``B``)."""

    vm_pu: np.ndarray  # [B, n_bus] voltage magnitudes
    v_complex_pu: np.ndarray  # [B, n_bus] complex voltages (warm start of the next flow)
    p_loss_mw: np.ndarray  # [B] active losses (0 where the flow failed)
    costs: np.ndarray  # [B, 2] GRID_COSTS: voltage_violation [p.u.], thermal_overload [MVAh]
    info: dict[str, np.ndarray]  # the grid info keys (module docstring), each [B]


class FeederModel:
    """A radial feeder with its calendar loads: per-bus demand of any step, and the step's power
    flow.

    ``profiles`` is the split's profiles (:attr:`powerzoo.tasks.base.Task.profiles`),
    ``split_days`` its calendar days; loads are ``bus_pd_mw * load_scale * demand_pu``;
    ``step_hours`` the step's length [h], the ``dt`` of ``thermal_overload`` [MVAh].
    """

    def __init__(
        self,
        case_name: str,
        profiles: Profiles,
        split_days: np.ndarray,
        load_scale: float,
        step_hours: float,
    ) -> None:
        case = load_case(case_name)
        if not isinstance(case, RadialFeeder):
            raise ValueError(f"{case_name} is not a radial feeder case")
        self.case = case
        self.load_scale = float(load_scale)
        self.steps_per_day = profiles.steps_per_day
        self.demand_pu = profiles.series["demand_pu"]
        self.price_per_mwh = profiles.series["price_per_mwh"]
        self.day_start = (
            split_days * profiles.steps_per_day
        )  # first calendar step of each split day
        self.bus_p_mw = case.bus_pd_mw * self.load_scale  # bus demand per unit of demand_pu
        self.bus_q_mvar = case.bus_qd_mvar * self.load_scale
        self.rating_mva = case.branch_rating_mva
        # MVAh of overload per unit of (I / I_rated - 1) over one step
        self._overload_mvah_per_unit = self.rating_mva * float(step_hours)
        # no overload is then exactly 0 MVAh (an infinite rating makes it 0 x inf, NaN)
        self._finite_ratings = bool(np.isfinite(self._overload_mvah_per_unit).all())
        self.nonconverged_voltage_pu = NONCONVERGED_VOLTAGE_PU_PER_BUS * (case.n_bus - 1)
        self._v_lo, self._v_hi = np.float64(V_MIN_PU), np.float64(V_MAX_PU)
        self._zero, self._one = np.float64(0.0), np.float64(1.0)
        self._scratch = Scratch()  # the cost terms' [B, n] temporaries, reused

    @property
    def n_bus(self) -> int:
        return self.case.n_bus

    def flat_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index [B] of step ``t`` of split day ``day_id``."""
        return self.day_start.take(day_id) + t

    def bus_loads(self, demand_pu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bus demand ``(p_mw, q_mvar)`` [B, n_bus] at system demand ``demand_pu`` [B]."""
        d = demand_pu[:, None]
        return d * self.bus_p_mw, d * self.bus_q_mvar

    def solve(
        self,
        p_mw: np.ndarray,
        q_mvar: np.ndarray,
        v_init: np.ndarray | None = None,
        head_vm_pu: float | np.ndarray | None = None,
    ) -> GridStep:
        """Power flow of net demand ``p_mw`` / ``q_mvar`` [B, n_bus] (MW, Mvar; negative =
        export), the head at ``head_vm_pu`` (p.u., scalar or [B]; default the case's 1.00)."""
        batch = p_mw.shape[0]
        if head_vm_pu is None:
            v0 = np.full(batch, self.case.slack_vm_pu, dtype=np.complex128)
        elif isinstance(head_vm_pu, np.ndarray) and head_vm_pu.shape == (batch,):
            v0 = head_vm_pu.astype(np.complex128)  # the LTC's heads [B]
        else:
            v0 = np.broadcast_to(np.asarray(head_vm_pu, dtype=np.float64), (batch,))
            v0 = v0.astype(np.complex128)
        result = solve_flow(
            self.case, p_mw, q_mvar, v0, v_init, max_iter=PF_MAX_ITER, tol_pu=PF_TOL_PU
        )
        vm, loading = result.vm_pu, result.branch_loading
        v_min, v_max = _min_reduce(vm, axis=1), _max_reduce(vm, axis=1)
        max_loading = _max_reduce(loading, axis=1)
        costs = np.empty((batch, 2))
        # each cost is exactly 0 where every bus is inside the band / every line within its
        # rating (NaN fails the tests and takes the full computation)
        if _lowest(v_min) >= self._v_lo and _highest(v_max) <= self._v_hi:
            costs[:, 0] = 0.0
        else:
            maximum, zero, work = np.maximum, self._zero, self._scratch
            # max(lo - v, v - hi) is > 0 exactly when v is outside the band (both cannot be)
            below = np.subtract(self._v_lo, vm, out=work("below", vm.shape))
            above = np.subtract(vm, self._v_hi, out=work("above", vm.shape))
            _add_reduce(
                maximum(maximum(below, above, out=below), zero, out=below), axis=1, out=costs[:, 0]
            )
        if self._finite_ratings and _highest(max_loading) <= self._one:
            costs[:, 1] = 0.0
        else:
            over = np.subtract(loading, self._one, out=self._scratch("over", loading.shape))
            np.maximum(over, self._zero, out=over)
            np.matmul(over, self._overload_mvah_per_unit, out=costs[:, 1])
        converged = result.converged
        p_loss = result.p_loss_mw
        if not result.all_converged:
            failed = ~converged
            costs[failed, 0] = self.nonconverged_voltage_pu
            costs[failed, 1] = 0.0
            p_loss = np.where(failed, 0.0, p_loss)
        info = {
            "pf_converged": converged,
            "p_loss_mw": p_loss,
            "feeder_p_mw": result.feeder_p_mw,
            "feeder_q_mvar": result.feeder_q_mvar,
            "v_min_pu": v_min,
            "v_max_pu": v_max,
            "max_branch_loading": max_loading,
        }
        return GridStep(vm, result.v_complex_pu, p_loss, costs, info)
