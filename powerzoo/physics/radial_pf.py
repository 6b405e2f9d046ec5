"""Exact AC power flow on a radial feeder, batched over a leading axis ``B``.

:func:`radial_power_flow` solves the full (not linearised) AC power-flow equations of a
:class:`~powerzoo.physics.feeder.RadialFeeder` for ``B`` load scenarios at once by the
backward/forward sweep in its current-summation form: with the slack voltage ``V0``, the complex
bus voltages ``V`` and constant-power demand ``S = P + jQ`` per bus,

* bus currents ``I = conj(S / V)``;
* backward sweep: each branch carries the sum ``J`` of the bus currents downstream of it;
* forward sweep: ``V_child = V_parent - z * J`` from the head outwards,

repeated until the largest voltage change of an iteration is below ``tol_pu`` (a fixed point
of these three steps solves the AC equations exactly). Two evaluations of the same iteration
are implemented; ``method="auto"`` picks by measurement (``benchmarks/radial_pf_speed.py``):

* ``"dense"``: both sweeps folded into one complex matrix product with the path-impedance
  matrix ``Z = BCBV @ BIBC`` (``V = V0 - I @ Z``): fewest Python calls, fastest for small
  batches;
* ``"sweep"``: the sweeps level by level over the tree depth (a Python loop over the depth,
  never over the batch) in a bus-major ``[n_bus, B]`` layout, ``O(n_bus)`` work per scenario
  instead of ``O(n_bus^2)``: fastest once ``B * (n_bus - 1) >= SWEEP_MIN_WORK`` (from about
  300 scenarios on the 33-bus feeder and 70 on the 141-bus one).

Both start from the base-case voltage drop scaled by each scenario's total demand (one or two
sweeps fewer than a flat start), keep their work arrays between calls, and run with BLAS pinned
to one thread (threadpoolctl; measured: the small products gain nothing from a second thread
and stall when its core is busy). A ``scipy.sparse`` BIBC/BCBV form was measured too and is
slower than both (table in ``benchmarks/radial_pf_speed.py``'s output). :func:`solve_flow` is
the same solve without the input checks, for a caller whose inputs are right by construction (a
feeder task's step, where at one scenario the checks cost as much as a sweep).

Non-convergence is reported in ``converged``, never raised: a scenario whose iterates stall
(loading near the voltage-collapse point) or blow up (no solution) keeps the last finite
iterate, which is **not** a power-flow solution; callers treat such a row as a failed step.
Units: MW, Mvar, MVA, kA, p.u. of the bus base voltage; net demand is positive for
consumption and negative for export (DER injection). Validated against pandapower's
Newton-Raphson in ``tests/physics/test_radial_pf.py``.

:func:`lindistflow` is the linear, lossless DistFlow approximation of the same feeder (for
planners and oracles): squared voltages linear in the injections, ``v = V0^2 - 2 (R p + X q)``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from powerzoo.physics.feeder import RadialFeeder
from powerzoo.physics.radial_sweep import (
    FeederPlan,
    backward,
    cold_start,
    feeder_plan,
    gather,
    iterate,
)

__all__ = [
    "SWEEP_MIN_WORK",
    "LinDistFlowResult",
    "RadialPFResult",
    "lindistflow",
    "radial_power_flow",
    "solve_flow",
]

SWEEP_MIN_WORK = 10_000  # "auto" sweeps level by level from B * (n_bus - 1) >= this on (measured)
_HUGE = 1e30  # stands in for inf in rows that diverged
# multiply-adds of one dense product from which BLAS is pinned to one thread: OpenBLAS may
# split a matrix-vector product over threads from 2,304 x 4 = 9,216 multiply-adds on (its
# gemv threshold), and the split changes the last bits of the sums with the thread count
_PIN_MIN_WORK = 9_216
_POOL_MIN_SIZE = 16384  # results of at least this many branch values come from the pool
_add_reduce, _and_reduce = np.add.reduce, np.logical_and.reduce  # without the methods' wrappers
_dot = np.dot  # matmul's BLAS calls (the same sums), with less dispatch at small sizes


@dataclass(frozen=True, eq=False)
class RadialPFResult:
    """Power-flow result for a batch of ``B`` scenarios (every array has leading axis ``B``).

    Branch quantities are at the sending (upstream, ``branch_from_bus``) end. ``iterations`` is
    the number of sweeps run (the slowest scenario's). Rows with ``converged == False`` hold the
    last finite iterate, not a solution. The branch-flow and angle properties are computed on
    first access (the rest, ``branch_loading`` included, by the solve); arrays may be
    Fortran-ordered views.
    """

    vm_pu: np.ndarray  # [B, n_bus] voltage magnitude
    v_complex_pu: np.ndarray  # [B, n_bus] complex voltage (warm start for the next solve)
    branch_current_pu: np.ndarray  # [B, n_branch] complex branch current (p.u. of base current)
    p_loss_mw: np.ndarray  # [B] active losses
    q_loss_mvar: np.ndarray  # [B] reactive losses
    feeder_p_mw: np.ndarray  # [B] active power drawn at the head (loads - DER + losses)
    feeder_q_mvar: np.ndarray  # [B] reactive power drawn at the head
    converged: np.ndarray  # [B] bool
    iterations: int
    # [B, n_branch] current over the thermal rating (1.0 = at the limit; pandapower's
    # ``loading_percent / 100``)
    branch_loading: np.ndarray
    case: RadialFeeder = field(repr=False)
    _current_abs_pu: np.ndarray = field(repr=False)  # [B, n_branch] |branch current|
    _all_converged: bool | None = field(default=None, repr=False)  # None: read ``converged``

    @property
    def all_converged(self) -> bool:
        """Whether every row converged."""
        if self._all_converged is None:
            return bool(_and_reduce(self.converged))
        return self._all_converged

    @functools.cached_property
    def va_degree(self) -> np.ndarray:
        """[B, n_bus] voltage angle [degree], the slack at 0."""
        return self._finite(np.degrees(np.angle(self.v_complex_pu)))

    @functools.cached_property
    def branch_s_complex_mva(self) -> np.ndarray:
        """[B, n_branch] complex power ``P + jQ`` entering each branch at its sending end [MVA]."""
        s = np.conjugate(self.branch_current_pu)
        s *= self.v_complex_pu[:, self.case.branch_from_bus]
        s *= self.case.base_mva
        return self._finite(s)

    @property
    def branch_p_mw(self) -> np.ndarray:
        """[B, n_branch] active power flow at the sending end [MW]."""
        return self.branch_s_complex_mva.real

    @property
    def branch_q_mvar(self) -> np.ndarray:
        """[B, n_branch] reactive power flow at the sending end [Mvar]."""
        return self.branch_s_complex_mva.imag

    @functools.cached_property
    def branch_s_mva(self) -> np.ndarray:
        """[B, n_branch] apparent power at the sending end [MVA]."""
        return self._finite(np.abs(self.branch_s_complex_mva))

    @functools.cached_property
    def branch_i_ka(self) -> np.ndarray:
        """[B, n_branch] current magnitude [kA]."""
        return self._finite(self._current_abs_pu * self.case.branch_i_base_ka)

    def _finite(self, value: np.ndarray) -> np.ndarray:
        """``value`` with NaN / inf (possible only in non-converged rows) made finite."""
        return value if self.all_converged else _make_finite(value)


@dataclass(frozen=True, eq=False)
class LinDistFlowResult:
    """LinDistFlow (linear, lossless) result for ``B`` scenarios; flows at the sending end."""

    vm_pu: np.ndarray  # [B, n_bus]
    branch_p_mw: np.ndarray  # [B, n_branch] (lossless: downstream net demand)
    branch_q_mvar: np.ndarray  # [B, n_branch]
    feeder_p_mw: np.ndarray  # [B]
    feeder_q_mvar: np.ndarray  # [B]


def _check_inputs(
    case: RadialFeeder, p_mw: object, q_mvar: object
) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(case, RadialFeeder):
        raise TypeError(
            f"case must be a RadialFeeder (load_case('case33bw') or load_case('case141')), "
            f"got {type(case).__name__}"
        )
    arrays = []
    for label, value in (("p_mw", p_mw), ("q_mvar", q_mvar)):
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{label} must be numeric, got {type(value).__name__}") from err
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[1] != case.n_bus or array.shape[0] == 0:
            raise ValueError(
                f"{label} must have shape [n_bus] or [B, n_bus] with n_bus={case.n_bus} "
                f"({case.name}, 0-based bus order of the case file) and B >= 1, got {array.shape}"
            )
        arrays.append(array)
    p, q = arrays
    if p.shape != q.shape:
        raise ValueError(f"p_mw {p.shape} and q_mvar {q.shape} differ in shape")
    if not math.isfinite(p.sum() + q.sum()):  # one NaN / inf anywhere makes the sum non-finite
        for label, array in (("p_mw", p), ("q_mvar", q)):
            bad = np.argwhere(~np.isfinite(array))
            if bad.size:
                row, bus = (int(i) for i in bad[0])
                raise ValueError(
                    f"{label}[{row}, {bus}] is {array[row, bus]} "
                    f"({len(bad)} of {array.size} entries are NaN or inf)"
                )
        raise ValueError("p_mw and q_mvar are finite but too large to sum (beyond 1e308 MW)")
    return p, q


def _slack_voltage(case: RadialFeeder, slack_vm_pu: object, batch: int) -> np.ndarray:
    """[B] complex head voltage (angle 0)."""
    if slack_vm_pu is None:
        return np.full(batch, case.slack_vm_pu, dtype=np.complex128)
    vm = np.asarray(slack_vm_pu, dtype=np.float64)
    if vm.shape not in ((), (batch,)) or not (np.all(np.isfinite(vm)) and np.all(vm > 0)):
        raise ValueError(
            f"slack_vm_pu must be positive and finite, a scalar or [B={batch}], got {slack_vm_pu!r}"
        )
    return np.broadcast_to(vm, (batch,)).astype(np.complex128)


def radial_power_flow(
    case: RadialFeeder,
    p_mw: np.ndarray,
    q_mvar: np.ndarray,
    *,
    max_iter: int = 50,
    tol_pu: float = 1e-8,
    slack_vm_pu: float | np.ndarray | None = None,
    v_init: np.ndarray | None = None,
    method: str = "auto",
) -> RadialPFResult:
    """Exact AC power flow of ``case`` for net demand ``p_mw`` / ``q_mvar`` [MW, Mvar].

    ``p_mw`` and ``q_mvar``: ``[B, n_bus]`` (or ``[n_bus]`` for ``B = 1``), positive =
    consumption, in the 0-based bus order of the case file (the slack bus's own demand is drawn
    straight from the head). Iterates until the largest voltage change of a sweep is below
    ``tol_pu`` (the solution is then within about ``tol_pu / 10`` of the exact one) or
    ``max_iter`` sweeps ran; rows that did not converge are flagged in ``converged``, never
    raised. ``slack_vm_pu`` (scalar or ``[B]``) overrides the case's head voltage; ``v_init``
    (complex ``[B, n_bus]``, e.g. the previous step's ``v_complex_pu``) warm-starts the
    iteration. ``method``: ``"auto"`` | ``"dense"`` | ``"sweep"`` (module docstring; all give
    the same solution). Raises ``ValueError`` for malformed input.

    Args:
        case: The radial feeder.
        p_mw: Net active demand [B, n_bus] or [n_bus], MW (+ consumption).
        q_mvar: Net reactive demand, same shape, Mvar.
        max_iter: Most sweeps.
        tol_pu: Convergence tolerance on the voltage change, p.u.
        slack_vm_pu: Head voltage, p.u. (scalar or [B]; default: the case's).
        v_init: Complex starting voltages [B, n_bus], p.u.
        method: ``"auto"``, ``"dense"`` or ``"sweep"``.

    Returns:
        Bus voltages (p.u.), branch currents (p.u.), losses (MW, Mvar), the head's power
        (MW, Mvar) and convergence per row.
    """
    p, q = _check_inputs(case, p_mw, q_mvar)
    if int(max_iter) < 1 or not float(tol_pu) > 0:
        raise ValueError(f"max_iter must be >= 1 and tol_pu > 0, got {max_iter!r}, {tol_pu!r}")
    if method not in ("auto", "dense", "sweep"):
        raise ValueError(f"method must be 'auto', 'dense' or 'sweep', got {method!r}")
    batch = p.shape[0]
    v0 = _slack_voltage(case, slack_vm_pu, batch)
    if v_init is not None:
        v_init = np.asarray(v_init, dtype=np.complex128)
        if v_init.ndim == 1:
            v_init = v_init[None, :]
        if v_init.shape != (batch, case.n_bus) or not np.all(np.isfinite(v_init)):
            raise ValueError(
                f"v_init must be finite with shape {(batch, case.n_bus)}, got {v_init.shape}"
            )
    return solve_flow(
        case, p, q, v0, v_init, max_iter=int(max_iter), tol_pu=float(tol_pu), method=method
    )


def solve_flow(
    case: RadialFeeder,
    p: np.ndarray,
    q: np.ndarray,
    v0: np.ndarray,
    v_init: np.ndarray | None = None,
    *,
    max_iter: int = 50,
    tol_pu: float = 1e-8,
    method: str = "auto",
) -> RadialPFResult:
    """:func:`radial_power_flow` without its input checks, for callers whose inputs are
    well-formed by construction (a task's step): ``p`` / ``q`` float64 [B, n_bus] (MW, Mvar),
    ``v0`` the complex head voltage [B] (p.u.), ``v_init`` finite complex [B, n_bus] or
    ``None``, ``max_iter`` >= 1, ``tol_pu`` > 0 (p.u.), ``method`` as there. Non-finite loads
    raise the same ``ValueError`` (checked only when a row did not converge)."""
    plan = feeder_plan(case)
    batch = p.shape[0]
    if method == "auto":
        rows = batch * plan.m >= SWEEP_MIN_WORK
    else:
        rows = method == "sweep"
    # working layout: [m, B] for the level sweep (rows of B scenarios), [B, m] for dense
    cs, v, new, work, scratch = plan.buffers((plan.m, batch) if rows else (batch, plan.m))
    gather(p, plan.order, plan.inv_base_mva, cs.real, rows, scratch)  # conj(S) [p.u.]
    gather(q, plan.order, -plan.inv_base_mva, cs.imag, rows, scratch)
    # OpenBLAS runs a product on one thread below 9,216 multiply-adds anyway (its gemv
    # threshold): small batches skip the pinning and its library calls
    blas, threads = _pin_blas() if batch * plan.m * plan.m >= _PIN_MIN_WORK else ((), ())
    try:
        with np.errstate(all="ignore"):
            if v_init is None:
                cold_start(plan, cs, v0, v, rows)
            elif rows:
                v_init.T.take(plan.order, axis=0, out=v)
            else:
                v_init.take(plan.order, axis=1, out=v)
            v, converged, iterations, all_converged = iterate(
                plan, cs, v0, v, new, work, scratch, max_iter, tol_pu, rows
            )
            if not all_converged:  # a NaN or inf load never converges: named as the checks do
                _check_inputs(case, p, q)
            done = (converged, iterations, all_converged)
            return _outputs(case, plan, p, q, cs, v0, v, work, scratch, *done, rows=rows)
    finally:
        for lib, n in zip(blas, threads, strict=True):
            lib.set_num_threads(n)


_BLAS_LIBS: list | None = None  # threadpoolctl controllers of the loaded BLAS libraries


def _pin_blas() -> tuple[list, list[int]]:
    """Limit BLAS to one thread for this call; returns the libraries changed and their previous
    thread counts. Measured (``benchmarks/radial_pf_speed.py``): the small matrix products of
    the kernel gain nothing from a second thread, and lose ~100x on a loaded machine when
    OpenBLAS's worker threads wait for a busy core."""
    global _BLAS_LIBS
    if _BLAS_LIBS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS_LIBS = [
                lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"
            ]
        except Exception:  # noqa: BLE001 - no threadpoolctl / unknown BLAS: leave threads alone
            _BLAS_LIBS = []
    changed, threads = [], []
    for lib in _BLAS_LIBS:
        n = lib.get_num_threads()
        if n is not None and n > 1:
            lib.set_num_threads(1)
            changed.append(lib)
            threads.append(n)
    return changed, threads


def _outputs(
    case: RadialFeeder,
    plan: FeederPlan,
    p: np.ndarray,
    q: np.ndarray,
    cs: np.ndarray,
    v0: np.ndarray,
    v: np.ndarray,
    work: np.ndarray,
    scratch: np.ndarray,
    converged: np.ndarray,
    iterations: int,
    all_converged: bool,
    rows: bool,
) -> RadialPFResult:
    """Currents, losses and head power from the final voltages ``v`` (working layout). In the
    [m, B] layout everything is computed bus-major and returned as transposed views."""
    batch, slack, n_bus, m = p.shape[0], case.slack_bus, case.n_bus, plan.m
    bus_shape, branch_shape = ((n_bus, batch), (m, batch)) if rows else ((batch, n_bus), (batch, m))
    if batch * m < _POOL_MIN_SIZE:  # small: fresh memory is cheap
        v_bus, j = (
            np.empty(bus_shape, dtype=np.complex128),
            np.empty(branch_shape, dtype=np.complex128),
        )
        vm, j_abs = np.empty(bus_shape), np.empty(branch_shape)
    else:
        block = plan.output_block(batch)
        v_bus = block[: 2 * n_bus * batch].view(np.complex128).reshape(bus_shape)
        j = (
            block[2 * n_bus * batch : 2 * (n_bus + m) * batch]
            .view(np.complex128)
            .reshape(branch_shape)
        )
        vm = block[2 * (n_bus + m) * batch : (3 * n_bus + 2 * m) * batch].reshape(bus_shape)
        j_abs = block[(3 * n_bus + 2 * m) * batch :].reshape(branch_shape)
    j2 = scratch.reshape(branch_shape)
    current = np.conjugate(v, out=work if work.shape == v.shape else None)
    np.divide(cs, current, out=current)  # bus currents of the final voltages
    if rows:
        backward(plan, current)
        np.take(current, plan.branch_row, axis=0, out=j)  # [n_branch, B]
        v_bus[plan.order] = v
        v_bus[slack] = v0
        j_head = (
            j[plan.root_branch]
            if plan.root_branch >= 0
            else _add_reduce(j[plan.root_branches], axis=0)
        )
    else:
        _dot(current, plan.subtree_branch_c, out=j)  # [B, n_branch]
        v_bus[:, plan.order] = v
        v_bus[:, slack] = v0
        j_head = (
            j[:, plan.root_branch]  # one branch leaves the head: its current, no sum
            if plan.root_branch >= 0
            else _add_reduce(j[:, plan.root_branches], axis=1)
        )
    np.abs(v_bus, out=vm)
    np.abs(j, out=j_abs)
    np.multiply(j_abs, j_abs, out=j2)
    s_head = v0 * np.conjugate(j_head) * case.base_mva
    if rows:  # [n, B] -> [B, n] views
        vm, v_bus, j, j_abs = vm.T, v_bus.T, j.T, j_abs.T
        p_loss, q_loss = plan.r_mva @ j2, plan.x_mva @ j2
    else:
        p_loss, q_loss = _dot(j2, plan.r_mva), _dot(j2, plan.x_mva)
    feeder_p, feeder_q = s_head.real + p[:, slack], s_head.imag + q[:, slack]
    if not all_converged:  # NaN / inf, possible only in the rows that failed, made finite
        for value in (vm, v_bus, j, p_loss, q_loss, feeder_p, feeder_q, j_abs):
            _make_finite(value)
    loading = j_abs * plan.loading_per_pu
    return RadialPFResult(
        vm_pu=vm,
        v_complex_pu=v_bus,
        branch_current_pu=j,
        p_loss_mw=p_loss,
        q_loss_mvar=q_loss,
        feeder_p_mw=feeder_p,
        feeder_q_mvar=feeder_q,
        converged=converged,
        iterations=iterations,
        branch_loading=loading if all_converged else _make_finite(loading),
        case=case,
        _current_abs_pu=j_abs,
        _all_converged=all_converged,
    )


def _make_finite(value: np.ndarray) -> np.ndarray:
    """``value`` with NaN / inf made finite, in place (NaN: 0, +-inf: +-1e30)."""
    return np.nan_to_num(value, copy=False, nan=0.0, posinf=_HUGE, neginf=-_HUGE)


def lindistflow(
    case: RadialFeeder,
    p_mw: np.ndarray,
    q_mvar: np.ndarray,
    *,
    slack_vm_pu: float | np.ndarray | None = None,
) -> LinDistFlowResult:
    """LinDistFlow (Baran & Wu's linearised, lossless DistFlow) for net demand ``p_mw`` /
    ``q_mvar`` (same shapes and signs as :func:`radial_power_flow`).

    ``vm^2 = V0^2 - 2 (R p + X q)`` with the path-resistance / -reactance matrices ``R`` and
    ``X`` (p.u.); branch flows are the downstream net demand. Off the exact solution by about
    1e-3 to 1e-2 p.u. on the published feeders; use it where linearity matters (planning LPs).

    Args:
        case: The radial feeder.
        p_mw: Net active demand [B, n_bus] or [n_bus], MW.
        q_mvar: Net reactive demand, same shape, Mvar.
        slack_vm_pu: Head voltage, p.u. (scalar or [B]; default: the case's).

    Returns:
        Bus voltages (p.u.) and branch flows (MW, Mvar).
    """
    p, q = _check_inputs(case, p_mw, q_mvar)
    plan = feeder_plan(case)
    batch, base = p.shape[0], case.base_mva
    vm0 = np.abs(_slack_voltage(case, slack_vm_pu, batch))
    p_rows, q_rows = p[:, plan.order] / base, q[:, plan.order] / base
    v2 = vm0[:, None] ** 2 - 2.0 * (p_rows @ plan.z_path.real + q_rows @ plan.z_path.imag)
    vm = np.empty((batch, case.n_bus))
    vm[:, case.slack_bus] = vm0
    vm[:, plan.order] = np.sqrt(np.maximum(v2, 0.0))
    flow_p = (p_rows @ plan.subtree)[:, plan.branch_row] * base
    flow_q = (q_rows @ plan.subtree)[:, plan.branch_row] * base
    return LinDistFlowResult(
        vm_pu=vm,
        branch_p_mw=flow_p,
        branch_q_mvar=flow_q,
        feeder_p_mw=p.sum(axis=1),
        feeder_q_mvar=q.sum(axis=1),
    )
