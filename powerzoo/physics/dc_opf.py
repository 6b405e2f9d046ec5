"""DC optimal power flow (the dispatch oracle) on HiGHS, plus cheap batched evaluators.

PTDF formulation (the reference bus balances the system)::

    min_p   sum_g c2_g p_g^2 + c1_g p_g + c0_g   (+ penalty * sum_l s_l  if soft limits)
    s.t.    sum_g p_g = sum_i d_i                                   (dual: lambda)
            -k F_l - s_l <= PTDF_l (C_g p - d) <= k F_l + s_l       (dual: mu_l)
            pmin_g <= p_g <= pmax_g,  s_l >= 0

with ``k = line_limit_scale``.  Linear costs give an LP (dual simplex); quadratic costs are
solved exactly as a convex QP by HiGHS (which also returns duals).  Locational marginal
prices are the derivative of the optimal cost w.r.t. the demand at each bus:
``lmp_i = lambda + sum_l mu_l PTDF_{l,i}``: the energy component ``lambda`` (price at the
reference bus) plus the congestion component.  highspy is imported lazily.

Solvers.  The QP goes to :class:`powerzoo.physics.qp_solver.SolverChain`: HiGHS
(warm-started from one load to the next), retried on rescaled columns and finally by a numpy
interior-point method for the loads HiGHS fails on without an infeasibility verdict (see that
module for why).  Every accepted solution is checked for primal feasibility; if no method
succeeds, :func:`solve_dc_opf` raises ``RuntimeError`` instead of returning NaN.

Large networks (more than ``DENSE_MAX_BUSES`` buses) are solved with lazy flow constraints, as
market-clearing engines do: the problem is first solved with the flow rows of no branch, the
full flows of the solution come from the sparse DC power flow, the branches above their rating
join the monitored set (their PTDF rows from :func:`~powerzoo.physics.dc_power_flow.ptdf_rows`),
and the problem is solved again, until no unmonitored branch is above its rating. The optimum is
the full problem's (a branch left out is within its limit at the optimum, so its row is inactive);
the monitored set carries over from one load row to the next. Phase shifters add their constant
flow to every flow row (:func:`~powerzoo.physics.dc_power_flow.phase_shift_flow_mw`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from powerzoo.physics.dc_power_flow import (
    DENSE_MAX_BUSES,
    bus_injection_mw,
    dc_power_flow,
    line_overload_mw,
    phase_shift_flow_mw,
    ptdf_matrix,
    ptdf_rows,
)
from powerzoo.physics.dc_sparse import island_reference_buses
from powerzoo.physics.network import NetworkCase
from powerzoo.physics.qp_solver import QPModel, SolverChain

__all__ = [
    "DCOPFResult",
    "UnitBounds",
    "cost_coefficients",
    "dispatch_cost",
    "line_overload_mw",
    "solve_dc_opf",
]

UnitBounds = Callable[[int, "np.ndarray | None"], tuple[np.ndarray, np.ndarray]]
"""Row ``k``'s unit bounds ``(lower, upper)`` [n_gen] MW from the previous row's dispatch."""

_DROP_TOL = 1e-10  # |PTDF * C_g| entries below this are dropped from the constraint matrix
_LAZY_TOL_MW = 1e-6  # an unmonitored branch this far above its rating joins the monitored set
_LAZY_MAX_ROUNDS = 50


@dataclass(frozen=True)
class DCOPFResult:
    """DC-OPF solution.  For a 1-D load input the leading batch dim ``B`` is absent
    (``cost_per_h`` is a float and ``status`` a str); otherwise arrays lead with ``B`` and
    ``status`` is an array of str.  Rows HiGHS proves infeasible are NaN (solver failures
    are retried, then raise ``RuntimeError``; see the module docstring).
    """

    cost_per_h: np.ndarray | float  # [B] generation cost incl. c0 (no slack penalty)
    objective_per_h: np.ndarray | float  # [B] cost_per_h + soft-limit penalty
    gen_p_mw: np.ndarray  # [B, n_gen]
    branch_flow_mw: np.ndarray  # [B, n_branch]
    lmp_per_mwh: np.ndarray  # [B, n_bus]
    lmp_energy_per_mwh: np.ndarray | float  # [B] (= LMP at the reference bus)
    lmp_congestion_per_mwh: np.ndarray  # [B, n_bus]
    branch_mu_per_mwh: np.ndarray  # [B, n_branch] flow-limit shadow price (signed, 0 if slack)
    line_slack_mw: np.ndarray  # [B, n_branch] soft-limit violation (0 for hard limits)
    status: np.ndarray | str  # [B] "optimal", or HiGHS's lower-case verdict ("infeasible")

    @property
    def success(self) -> bool:
        """True if every solve is optimal."""
        return bool(np.all(np.asarray(self.status) == "optimal"))


def dispatch_cost(
    case: NetworkCase, gen_p_mw: np.ndarray, work: np.ndarray | None = None
) -> np.ndarray:
    """Generation cost [$/h] of dispatch ``[B, n_gen]`` (or ``[n_gen]``) -> ``[B]`` (or 0-d).

    ``sum_g c2 p^2 + c1 p + c0`` over in-service units; no LP is solved. ``work``: an optional
    float64 array of the dispatch's shape for the squares (no temporary).
    """
    p = np.asarray(gen_p_mw, dtype=float)
    if p.shape[-1] != case.n_gen:
        raise ValueError(f"gen_p_mw last dim {p.shape[-1]} != n_gen {case.n_gen}")
    c2, c1, c0 = cost_coefficients(case)
    return np.multiply(p, p, out=work) @ c2 + p @ c1 + c0


def cost_coefficients(case: NetworkCase) -> tuple[np.ndarray, np.ndarray, float]:
    """The coefficients :func:`dispatch_cost` prices a dispatch with.

    Args:
        case: The network case.

    Returns:
        ``(c2 [n_gen] $/MW^2h, c1 [n_gen] $/MWh, c0 $/h)``: each unit's quadratic and linear
        coefficients (0 for a unit out of service) and the in-service units' summed no-load cost.
    """
    on = case.gen_in_service
    c2 = np.where(on, case.gen_c2_per_mw2h, 0.0)
    c1 = np.where(on, case.gen_c1_per_mwh, 0.0)
    return c2, c1, float(np.sum(case.gen_c0_per_h[on]))


def solve_dc_opf(
    case: NetworkCase,
    load_mw: np.ndarray | None = None,
    line_limit_scale: float = 1.0,
    soft_line_penalty: float | None = None,
    gen_lower_mw: np.ndarray | None = None,
    gen_upper_mw: np.ndarray | None = None,
    bounds_of: UnitBounds | None = None,
) -> DCOPFResult:
    """Solve the DC-OPF for bus demand ``load_mw`` ``[n_bus]`` or ``[B, n_bus]`` [MW].

    ``load_mw=None`` uses the case's base demand.  ``line_limit_scale`` multiplies every
    finite branch rating.  ``soft_line_penalty`` [$/MWh] turns the flow limits into soft
    limits whose violation (``line_slack_mw``) is penalised at that price; ``None`` keeps
    them hard.  Batched input solves one problem per row (warm-started), so this is an
    oracle, not a step-path function.  ``gen_lower_mw`` / ``gen_upper_mw`` (``[n_gen]`` or
    ``[B, n_gen]``, MW) narrow the units' ``[Pmin, Pmax]`` per row, e.g. to a step's ramp range
    (``None``: the case's limits). ``bounds_of(k, p_prev)`` instead gives row ``k``'s bounds
    ``(lower, upper)`` [n_gen] from the previous row's dispatch ``p_prev`` (``None`` on the first
    row): the rows then form a sequence, e.g. steps within their ramp range.

    Rows HiGHS proves infeasible are NaN with ``status`` ``"infeasible"``.  Any other solver
    failure is retried (see the module docstring); ``RuntimeError`` is raised if every
    method fails, so a returned row is never NaN without an infeasibility verdict.

    Args:
        case: The transmission case.
        load_mw: Bus demand [n_bus] or [B, n_bus], MW (``None``: the case's).
        line_limit_scale: Factor on every finite branch rating.
        soft_line_penalty: Price of rating violations, $/MWh (``None``: hard limits).
        gen_lower_mw: Per-row lower bounds of the units [n_gen] or [B, n_gen], MW.
        gen_upper_mw: Per-row upper bounds of the units [n_gen] or [B, n_gen], MW.
        bounds_of: Row ``k``'s unit bounds from the previous row's dispatch (a sequence).

    Returns:
        Dispatch (MW), cost ($/h), branch flows (MW), LMPs ($/MWh) and solver status
        per row.
    """
    if line_limit_scale <= 0:
        raise ValueError("line_limit_scale must be > 0")
    if soft_line_penalty is not None and soft_line_penalty < 0:
        raise ValueError("soft_line_penalty must be >= 0 (or None for hard limits)")
    load = case.bus_pd_mw if load_mw is None else np.asarray(load_mw, dtype=float)
    single = load.ndim == 1
    load2d = np.atleast_2d(load)
    if load2d.ndim != 2 or load2d.shape[1] != case.n_bus:
        raise ValueError(f"load_mw must be [n_bus] or [B, n_bus], n_bus={case.n_bus}")
    n_batch = load2d.shape[0]
    n_gen, n_branch, n_bus = case.n_gen, case.n_branch, case.n_bus
    soft = soft_line_penalty is not None
    if island_reference_buses(case).size > 1:
        raise ValueError(f"{case.name}: the DC-OPF needs one connected network (it has islands)")
    lazy = n_bus > DENSE_MAX_BUSES
    limited_all = case.limited_branches
    shift = phase_shift_flow_mw(case)
    monitored = np.zeros(0, dtype=np.int64) if lazy else limited_all
    if bounds_of is None and (gen_lower_mw is not None or gen_upper_mw is not None):
        pmin, pmax = case.gen_limits_mw
        unit_lo = np.broadcast_to(pmin if gen_lower_mw is None else gen_lower_mw, (n_batch, n_gen))
        unit_up = np.broadcast_to(pmax if gen_upper_mw is None else gen_upper_mw, (n_batch, n_gen))

        def bounds_of(k: int, _: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
            return unit_lo[k], unit_up[k]

    bounded = bounds_of is not None
    problem = _FlowRows(case, monitored, line_limit_scale, soft, soft_line_penalty, bounded)

    gen_p = np.full((n_batch, n_gen), np.nan)
    lmp_energy = np.full(n_batch, np.nan)
    mu = np.full((n_batch, n_branch), np.nan)
    slack = np.zeros((n_batch, n_branch))
    congestion = np.zeros((n_batch, n_bus))
    status = np.empty(n_batch, dtype=object)
    previous: np.ndarray | None = None
    for k in range(n_batch):
        d = load2d[k]
        units = bounds_of(k, previous) if bounds_of is not None else None
        for _ in range(_LAZY_MAX_ROUNDS):
            text, x, y = problem.solve(d, shift, label=f"load row {k}", units=units)
            if text != "optimal" or not lazy:
                break
            flow = dc_power_flow(case, bus_injection_mw(case, x[:n_gen], d))
            over = np.abs(flow[limited_all]) - problem.rate_of(limited_all) > _LAZY_TOL_MW
            new = np.setdiff1d(limited_all[over], problem.monitored)
            if new.size == 0:
                break
            problem = _FlowRows(
                case,
                np.union1d(problem.monitored, new),
                line_limit_scale,
                soft,
                soft_line_penalty,
                bounded,
            )
        status[k] = text
        if text != "optimal":
            continue
        lim, n_lim = problem.monitored, problem.monitored.size
        gen_p[k] = x[:n_gen]
        if units is not None:  # HiGHS meets the bound rows to its tolerance
            gen_p[k] = np.clip(gen_p[k], units[0], units[1])
        previous = gen_p[k]
        lmp_energy[k] = y[0]
        mu_k = np.zeros(n_branch)
        mu_k[lim] = y[1 : 1 + n_lim] + (y[1 + n_lim : 1 + 2 * n_lim] if soft else 0.0)
        mu[k] = mu_k
        if soft:
            slack[k, lim] = x[n_gen:]
        if lazy and n_lim:  # (the dense path forms them all at once below)
            congestion[k] = mu_k[lim] @ problem.ptdf_rows
    # HiGHS row duals are d(objective)/d(row bound); every flow-row bound moves by
    # PTDF_{l,i} per MW of demand at bus i, the balance row by 1 -> lmp = y_bal + PTDF' mu
    if not lazy and limited_all.size:
        congestion = mu[:, limited_all] @ problem.ptdf_rows
    lmp = lmp_energy[:, None] + congestion
    flows = dc_power_flow(case, bus_injection_mw(case, np.nan_to_num(gen_p), load2d))
    flows[np.isnan(gen_p).any(axis=1)] = np.nan
    cost = dispatch_cost(case, gen_p)
    penalty = (soft_line_penalty or 0.0) * slack.sum(axis=1)
    status_arr = status.astype(str)
    if single:
        return DCOPFResult(
            cost_per_h=float(cost[0]),
            objective_per_h=float(cost[0] + penalty[0]),
            gen_p_mw=gen_p[0],
            branch_flow_mw=flows[0],
            lmp_per_mwh=lmp[0],
            lmp_energy_per_mwh=float(lmp_energy[0]),
            lmp_congestion_per_mwh=congestion[0],
            branch_mu_per_mwh=mu[0],
            line_slack_mw=slack[0],
            status=str(status_arr[0]),
        )
    return DCOPFResult(
        cost_per_h=cost,
        objective_per_h=cost + penalty,
        gen_p_mw=gen_p,
        branch_flow_mw=flows,
        lmp_per_mwh=lmp,
        lmp_energy_per_mwh=lmp_energy,
        lmp_congestion_per_mwh=congestion,
        branch_mu_per_mwh=mu,
        line_slack_mw=slack,
        status=status_arr,
    )


class _FlowRows:
    """The DC-OPF's HiGHS model with the flow rows of the ``monitored`` branches (columns: unit
    outputs, then with soft limits one slack per monitored branch; rows: the balance, then the
    flow rows, then with ``unit_rows`` one row per unit holding its per-solve bounds), and its
    solver chain."""

    def __init__(
        self,
        case: NetworkCase,
        monitored: np.ndarray,
        line_limit_scale: float,
        soft: bool,
        soft_line_penalty: float | None,
        unit_rows: bool = False,
    ) -> None:
        self.unit_rows = unit_rows
        self.monitored = np.asarray(monitored, dtype=np.int64)
        self.case, self.soft, self.scale = case, soft, line_limit_scale
        n_gen, n_lim = case.n_gen, self.monitored.size
        on = case.gen_in_service
        self.ptdf_rows = (  # [n_lim, n_bus]
            ptdf_rows(case, self.monitored)
            if case.n_bus > DENSE_MAX_BUSES
            else ptdf_matrix(case)[self.monitored]
        )
        a_flow = self.ptdf_rows[:, case.gen_bus] * on  # [n_lim, n_gen]
        a_flow[np.abs(a_flow) < _DROP_TOL] = 0.0
        self.f_max = self.rate_of(self.monitored)
        c2 = np.where(on, case.gen_c2_per_mw2h, 0.0)
        if np.any(c2 < 0):
            raise ValueError(f"{case.name}: negative quadratic cost (non-convex)")
        n_col = n_gen + (n_lim if soft else 0)
        hess = np.zeros(n_col)
        hess[:n_gen] = 2.0 * c2  # solvers minimise 0.5 x'Qx + c'x
        col_cost = np.concatenate(
            [
                np.where(on, case.gen_c1_per_mwh, 0.0),
                np.full(n_col - n_gen, soft_line_penalty or 0.0),
            ]
        )
        pmin, pmax = case.gen_limits_mw
        balance = np.concatenate([on.astype(float), np.zeros(n_col - n_gen)])[None, :]
        if soft:
            eye = np.eye(n_lim)
            rows = [balance, np.hstack([a_flow, -eye]), np.hstack([a_flow, eye])]
        else:
            rows = [balance, a_flow]
        if unit_rows:
            rows.append(np.eye(n_gen, n_col))
        model = QPModel(
            name=case.name,
            hess=hess,
            cost=col_cost,
            a_dense=np.vstack(rows),
            col_lower=np.concatenate([pmin, np.zeros(n_col - n_gen)]),
            col_upper=np.concatenate([pmax, np.full(n_col - n_gen, np.inf)]),
        )
        self.solvers = SolverChain(model, base_mva=case.base_mva)

    def rate_of(self, branches: np.ndarray) -> np.ndarray:
        """Flow limits [MW] of ``branches``: their ratings times the limit scale."""
        return self.case.branch_rate_a_mw[branches] * self.scale

    def solve(
        self,
        d: np.ndarray,
        shift: np.ndarray,
        label: str,
        units: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[str, Any, Any]:
        """Solve for bus demand ``d`` [n_bus]: ``(status, primal, row duals)``; ``units``: the
        units' bounds ``(lower, upper)`` [n_gen] MW of this solve (models with unit rows)."""
        # flow = A p - PTDF d + shift must lie in [-F, F]  <=>  A p in [o - F, o + F]
        offset = self.ptdf_rows @ d - shift[self.monitored]
        total = np.array([d.sum()])
        n_lim = self.monitored.size
        if self.soft:  # rows: A p - s <= F + offset;  A p + s >= -F + offset
            lo = np.concatenate([total, np.full(n_lim, -np.inf), offset - self.f_max])
            up = np.concatenate([total, offset + self.f_max, np.full(n_lim, np.inf)])
        else:
            lo = np.concatenate([total, offset - self.f_max])
            up = np.concatenate([total, offset + self.f_max])
        if self.unit_rows and units is not None:
            lo, up = np.concatenate([lo, units[0]]), np.concatenate([up, units[1]])
        return self.solvers.solve(lo, up, label=label)
