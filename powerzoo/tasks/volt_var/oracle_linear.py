"""The linearised three-phase model ``volt_var_123``'s oracles plan on (:mod:`.oracle`,
:mod:`.oracle_day`): each step's bus-phase voltages and losses around a reference setting.

The settings of one step are ``x = (taps, capacitors, PV reactive power)``. Around a reference
``x``, one row of the batched exact flow solves ``x`` itself and one row each ``x`` with one
device moved: one tap step (up, or down at the top), the capacitor switched, the PV inverter at
its full reactive limit (towards it, or back to 0 from a positive setting). The differences
divided by the moves are the sensitivities (secants) of every bus-phase voltage and of the losses
to each device. :func:`linearise` does this for every step of a plan in one call of the flow.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.tasks.volt_var.grid import VoltVarFeeder
from powerzoo.tasks.volt_var.spec import TAP_STEPS

__all__ = [
    "MARGIN_PU",
    "Q_PRICE",
    "SLACK_PRICE",
    "TAP_REACH",
    "DayInputs",
    "Linearisation",
    "linearise",
    "outranks",
    "sensitivity_rows",
]

MARGIN_PU = 0.002  # planned band [0.952, 1.048]: room for the linearisation error
SLACK_PRICE = 1e5  # $ per p.u. of planned violation
Q_PRICE = 1e-4  # $ per kvar of PV reactive power per step (inverters work only where useful)
TAP_REACH = 4  # tap steps a plan may move each regulator from the linearisation point
VIOLATION_TOL_PU = 1e-9  # violations closer than this are equal when plans are ranked


def outranks(a: tuple[float, float], b: tuple[float, float] | None) -> bool:
    """Whether a plan of ``a = (violation [p.u.], cost [$])`` under the exact flow is better
    than one of ``b``: less violation (by more than :data:`VIOLATION_TOL_PU`), or as little and
    a lower cost. Anything outranks ``None``."""
    if b is None:
        return True
    if a[0] < b[0] - VIOLATION_TOL_PU:
        return True
    return a[0] <= b[0] + VIOLATION_TOL_PU and a[1] < b[1]


@dataclasses.dataclass(frozen=True)
class DayInputs:
    """Known in advance (perfect foresight) for steps ``t0..H-1`` of one episode."""

    p_load_kw: np.ndarray  # [T, n_loads]
    q_load_kvar: np.ndarray  # [T, n_loads]
    pv_kw: np.ndarray  # [T, n_pv]
    loss_per_kw: np.ndarray  # [T] $ per kW of losses over each step
    q_limit_kvar: np.ndarray  # [T, n_pv] each inverter's reactive limit (0: asleep)


def sensitivity_rows(
    taps: np.ndarray,
    caps: np.ndarray,
    q: np.ndarray,
    q_limit: np.ndarray,
    q_move: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Settings of one step's sensitivity flows: ``x`` then each device moved (module docstring).

    Args:
        taps: [n_reg] tap positions of ``x``.
        caps: [n_cap] capacitor states (0 or 1).
        q: [n_pv] PV reactive power [kvar].
        q_limit: [n_pv] each inverter's reactive limit [kvar] (0: asleep; then moved 1 kvar).
        q_move: Each PV's move as a fraction of its limit (up from ``q <= 0``, else down).

    Returns:
        Taps [1 + n_x, n_reg], capacitors [1 + n_x, n_cap], PV kvar [1 + n_x, n_pv] of the rows
        and the move of each device [n_x] (tap steps, switchings, kvar).
    """
    n_r, n_c, n_q = taps.size, caps.size, q.size
    rows = 1 + n_r + n_c + n_q
    t = np.repeat(taps[None], rows, axis=0)
    c = np.repeat(caps[None], rows, axis=0)
    r = np.repeat(q[None], rows, axis=0)
    d_tap = np.where(taps < TAP_STEPS, 1.0, -1.0)
    d_cap = 1.0 - 2.0 * caps
    d_q = np.where(q_limit > 0.0, np.where(q <= 0.0, q_move, -q_move) * q_limit, 1.0)
    i = np.arange(n_r)
    t[1 + i, i] += d_tap
    j = np.arange(n_c)
    c[1 + n_r + j, j] += d_cap
    k = np.arange(n_q)
    r[1 + n_r + n_c + k, k] += d_q
    return t, c, r, np.concatenate([d_tap, d_cap, d_q])


@dataclasses.dataclass(frozen=True)
class Linearisation:
    """The exact flow of a plan's ``T`` steps and, if asked, the sensitivities around it."""

    converged: np.ndarray  # [T] bool
    violation_pu: np.ndarray  # [T] sum over bus-phases of the distance outside [0.95, 1.05]
    losses_kw: np.ndarray  # [T] losses [kW]
    vm_pu: np.ndarray  # [T, n_bp] voltage of every existing bus-phase [p.u.]
    sens: np.ndarray | None  # [T, n_bp, n_x] p.u. per tap step / switching / kvar
    loss_grad: np.ndarray | None  # [T, n_x] kW per tap step / switching / kvar


def linearise(
    model: VoltVarFeeder,
    day: DayInputs,
    taps: np.ndarray,
    caps: np.ndarray,
    q: np.ndarray,
    sensitivities: bool = True,
    q_move: float = 1.0,
) -> Linearisation:
    """Exact flows of the plan ``(taps, caps, q)`` over ``day`` and, with ``sensitivities``,
    every step's sensitivities around it, all in one batched call of the flow.

    Args:
        model: The task's feeder.
        day: The steps' loads, PV and reactive limits (``T`` steps).
        taps: [T, n_reg] tap positions.
        caps: [T, n_cap] capacitor states (0 or 1).
        q: [T, n_pv] PV reactive power [kvar].
        sensitivities: Also solve the moved rows (``1 + n_x`` rows per step instead of 1).
        q_move: Each PV's move in the moved rows, as a fraction of its limit.

    Returns:
        The :class:`Linearisation` (``sens`` and ``loss_grad`` ``None`` without sensitivities).
    """
    n_t = taps.shape[0]
    if sensitivities:
        rows = [
            sensitivity_rows(taps[s], caps[s], q[s], day.q_limit_kvar[s], q_move)
            for s in range(n_t)
        ]
        t, c, r = (np.concatenate([row[k] for row in rows]) for k in range(3))
        dx = np.stack([row[3] for row in rows])  # [T, n_x]
    else:
        t, c, r, dx = taps, caps, q, None
    per = t.shape[0] // n_t
    reading = model.solve(
        np.repeat(day.p_load_kw, per, axis=0),
        np.repeat(day.q_load_kvar, per, axis=0),
        t,
        c,
        np.repeat(day.pv_kw, per, axis=0),
        r,
    )
    finite = np.isfinite(reading.vm_pu[0]).ravel()
    vm = reading.vm_pu.reshape(n_t, per, -1)[:, :, finite]
    losses = reading.losses_kw.reshape(n_t, per)
    sens = loss_grad = None
    if dx is not None:
        sens = np.swapaxes((vm[:, 1:] - vm[:, :1]) / dx[:, :, None], 1, 2)
        loss_grad = (losses[:, 1:] - losses[:, :1]) / dx
    return Linearisation(
        converged=reading.converged.reshape(n_t, per)[:, 0],
        violation_pu=reading.violation_pu.reshape(n_t, per)[:, 0],
        losses_kw=losses[:, 0],
        vm_pu=vm[:, 0],
        sens=sens,
        loss_grad=loss_grad,
    )
