"""Perfect-foresight day plan of ``dc_scheduling``: one LP on HiGHS per pass.

The data centre's job-service and cooling blocks (:mod:`powerzoo.tasks.datacentre.planning`:
GPU-h served per class and deadline bucket, dropped and late work, the setpoint held just under
27 deg C) on a :class:`~powerzoo.tasks.datacentre.sparse_model.SparseModel`; every MWh paid at the
price, dropped or late work at ``SLA_PENALTY_PER_GPUH``. The feeder enters linearised: the
squared voltages ``v2 = v2_ref + s (P - P_ref)`` with LinDistFlow sensitivities ``s`` of the DC bus
(:func:`~powerzoo.tasks.feeder.voltage_sq_sensitivity`) around the exact flow at a reference DC
load ``P_ref``, kept in the band narrowed by ``ORACLE_BAND_MARGIN_PU`` by slacks at
``ORACLE_VOLTAGE_PENALTY``; the lines on the DC's path capped at their headroom over the
LinDistFlow base flows (:func:`line_headroom_mw`, slack at ``ORACLE_THERMAL_PENALTY``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.physics.radial_pf import lindistflow
from powerzoo.tasks.datacentre.planning import (
    add_cooling_rows,
    add_job_service,
    it_power_model,
    plan_shares,
)
from powerzoo.tasks.datacentre.sparse_model import SparseModel
from powerzoo.tasks.dc_scheduling.spec import SLA_PENALTY_PER_GPUH, DCSchedulingParams
from powerzoo.tasks.feeder import ORACLE_BAND_MARGIN_PU, ORACLE_VOLTAGE_PENALTY, V_MIN_PU

__all__ = [
    "ORACLE_LINE_VOLTAGE_PU",
    "ORACLE_PASSES",
    "ORACLE_THERMAL_PENALTY",
    "line_headroom_mw",
    "solve_day_lp",
]

ORACLE_THERMAL_PENALTY = 10_000.0  # $ per MW planned above a line's headroom
ORACLE_PASSES = 2  # LPs per plan: the second is linearised around the first plan's exact flow
ORACLE_LINE_VOLTAGE_PU = 0.95  # lines planned at |S| <= rating x 0.95 (I = S / V at a low voltage)


def line_headroom_mw(
    case: Any, bus_p_mw: np.ndarray, bus_q_mvar: np.ndarray, dc_bus: int, tan_phi: float
) -> np.ndarray:
    """Most DC power [S] (MW, at its power factor ``tan_phi = Q / P``) the lines from the head to
    bus ``dc_bus`` carry within ``rating x ORACLE_LINE_VOLTAGE_PU`` over the LinDistFlow flows of
    the feeder loads ``bus_p_mw``, ``bus_q_mvar`` [S, n_bus] (MW, Mvar) on ``case``."""
    bus = dc_bus
    path = []
    while case.bus_parent_branch[bus] >= 0:
        path.append(case.bus_parent_branch[bus])
        bus = case.bus_parent[bus]
    flows = lindistflow(case, bus_p_mw, bus_q_mvar)
    pb, qb = flows.branch_p_mw[:, path], flows.branch_q_mvar[:, path]
    limit = case.branch_rating_mva[path] * ORACLE_LINE_VOLTAGE_PU
    # (pb + P)^2 + (qb + t P)^2 = limit^2, the larger root
    a, half_b = 1.0 + tan_phi**2, pb + tan_phi * qb
    disc = half_b**2 - a * (pb**2 + qb**2 - limit**2)
    return np.maximum((np.sqrt(np.maximum(disc, 0.0)) - half_b) / a, 0.0).min(axis=1)


def solve_day_lp(
    params: DCSchedulingParams,
    arrivals: np.ndarray,
    bucket_due_step: np.ndarray,
    t0: int,
    allowance: np.ndarray,
    price: np.ndarray,
    cop: np.ndarray,
    heat_offset: np.ndarray,
    v2_ref: np.ndarray,
    p_ref: np.ndarray,
    sens: np.ndarray,
    headroom: np.ndarray,
    dt_h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GPU shares [S, 2] and facility power [S] (MW) of one LP (module docstring).

    ``arrivals`` [S, C, K] (GPU-h, row 0 the queue now), ``bucket_due_step`` [K], ``t0`` the first
    step and ``allowance`` [C] the carry allowance, as in
    :func:`~powerzoo.tasks.datacentre.planning.add_job_service`; ``price`` [S] ($/MWh); ``cop``
    and ``heat_offset`` [S] from :func:`~powerzoo.tasks.datacentre.planning.zone_trajectory`;
    ``v2_ref`` [S, n_bus] the squared voltages of the exact flow at the DC load ``p_ref`` [S]
    (MW); ``sens`` [n_bus] the change of ``v2`` per MW of DC load; ``headroom`` [S] from
    :func:`line_headroom_mw`; ``dt_h`` the step length (h).
    """
    n_steps = price.size
    it_base, mw_per_gpuh = it_power_model(params.cluster, dt_h)
    model = SparseModel()
    cooling = model.columns(n_steps, 0.0, np.inf, price * dt_h)
    served_by_class, groups = add_job_service(
        model,
        arrivals,
        bucket_due_step,
        t0,
        allowance,
        price * dt_h * mw_per_gpuh,
        SLA_PENALTY_PER_GPUH,
        params.cluster.n_gpus,
        dt_h,
    )
    add_cooling_rows(model, params, cooling, groups, cop, heat_offset, dt_h)
    # facility power P = it_base + mw_per_gpuh sum x + cooling: v2_ref + s (P - P_ref) + slack >= lo
    lo = (V_MIN_PU + ORACLE_BAND_MARGIN_PU) ** 2
    swing = (
        np.abs(sens) * params.cluster.p_max_mw * 1.5
    )  # the largest change of v2 the plan can make
    for bus in np.flatnonzero(np.any(v2_ref - swing < lo, axis=0)):
        steps = np.flatnonzero(v2_ref[:, bus] - swing[bus] < lo)
        s = sens[bus]
        slack = model.columns(steps.size, 0.0, np.inf, ORACLE_VOLTAGE_PENALTY)
        rhs = lo - v2_ref[steps, bus] + s * (p_ref[steps] - it_base)
        model.rows(
            [(cooling[steps], s), (slack, 1.0)],
            rhs,
            np.inf,
            [groups[j] for j in steps],
            s * mw_per_gpuh,
        )
    # lines: P - slack <= headroom
    slack = model.columns(n_steps, 0.0, np.inf, ORACLE_THERMAL_PENALTY * dt_h)
    model.rows([(cooling, 1.0), (slack, -1.0)], -np.inf, headroom - it_base, groups, mw_per_gpuh)
    v = model.solve("dc_scheduling", t0)[1]
    served = np.array([sum(v[c].sum() for c in step) for step in served_by_class])
    return plan_shares(
        v, served_by_class, params.cluster.n_gpus, dt_h
    ), it_base + mw_per_gpuh * served + v[cooling]
