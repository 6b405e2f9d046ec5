"""The on-load tap changer at a feeder task's head (:mod:`powerzoo.devices.tap_changer`): its
task keywords and the step of the power flow with the tap in the loop.

Modes (task keywords of :class:`FeederLtcParams`):

* ``ltc=True`` (default): the LTC under its automatic voltage controller. Each step the flow is
  solved at the current tap; the AVC measures the regulated voltage (the head, or with
  line-drop compensation the estimated load-centre voltage) and, where it is outside the band
  for the time delay (within the step at 30-minute steps), moves the tap; the rows whose tap
  moved are solved again at the new tap and the controller continues its sequence
  (:data:`AVC_ROUNDS` measurements at most), so the step's flow, costs and losses are those at
  the tap the controller settled on. With the head regulated and the stiff source the head
  voltage is linear in the tap, so one round settles it exactly. At reset the tap is the one the AVC
  settles on from neutral (:func:`~powerzoo.devices.tap_changer.settled_tap`): 3 steps,
  1.019 p.u., with the default band.
* ``ltc=False``: no tap changer, the head at the case's 1.00 p.u. (the feeder tasks before the
  LTC; a before/after comparison).
* a task with a ``ltc_action`` keyword may make the tap an action: the AVC is bypassed and the
  tap goes where the action puts it, each step moved one operation charged
  ``ltc_wear_cost_per_operation`` (:data:`~powerzoo.devices.tap_changer.WEAR_COST_PER_OPERATION`).

Info keys every feeder task with the layer reports, each ``[B]``: ``ltc_tap`` (position after
the step), ``ltc_operations`` (operations in the step) and ``head_vm_pu``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.devices.tap_changer import (
    WEAR_COST_PER_OPERATION,
    TapChangerParams,
    TapChangerState,
    avc_moves,
    avc_step,
    head_vm_pu,
    regulated_voltage_pu,
    settled_tap,
    tap_changer_set,
)

__all__ = ["AVC_ROUNDS", "FeederLtcParams", "FeederLtc", "LTC_INFO_KEYS"]

AVC_ROUNDS = 3  # measurements per step while the controller settles (flows: at most one more)
LTC_INFO_KEYS = ("ltc_tap", "ltc_operations", "head_vm_pu")
_DEFAULT = TapChangerParams()
_count_nonzero = np.count_nonzero


@dataclasses.dataclass(frozen=True)
class FeederLtcParams:
    """The task keywords of the LTC at a feeder's head (:mod:`powerzoo.tasks.feeder_ltc`)."""

    # an LTC at the head under its AVC; False: the head fixed at the case's 1.00 p.u.
    ltc: bool = True
    # AVC band centre and width (p.u.): 123 V +- 1 V on the 120 V base
    ltc_band_centre_pu: float = _DEFAULT.band_centre_pu
    ltc_bandwidth_pu: float = _DEFAULT.bandwidth_pu
    # line-drop compensation R and X (p.u. on the system base), off by default
    ltc_ldc_r_pu: float = 0.0
    ltc_ldc_x_pu: float = 0.0
    # $ per tap operation where the tap is an action (the AVC's own operations are not charged)
    ltc_wear_cost_per_operation: float = WEAR_COST_PER_OPERATION

    def tap_changer(self) -> TapChangerParams | None:
        """The LTC of these keywords (``None``: ``ltc=False``)."""
        if not self.ltc:
            return None
        if not self.ltc_wear_cost_per_operation >= 0.0:
            raise ValueError(
                "ltc_wear_cost_per_operation must be >= 0 $, got "
                f"{self.ltc_wear_cost_per_operation!r}"
            )
        return TapChangerParams(
            band_centre_pu=self.ltc_band_centre_pu,
            bandwidth_pu=self.ltc_bandwidth_pu,
            ldc_r_pu=self.ltc_ldc_r_pu,
            ldc_x_pu=self.ltc_ldc_x_pu,
        )


class FeederLtc:
    """The LTC of one feeder task, batched: reset, head voltage and the step's flow.

    ``params``: the LTC (``None``: no LTC, the head at the case's voltage); ``step_s``: the task
    step in seconds; ``base_mva``: the feeder's base (the head current of the line-drop
    compensation).
    """

    def __init__(self, params: TapChangerParams | None, step_s: float, base_mva: float) -> None:
        self.params = params
        self.step_s = float(step_s)
        self.base_mva = float(base_mva)
        self.start_tap = 0 if params is None else settled_tap(params)
        # head voltage of every tap position -n..n (p.u.), looked up by tap + n
        self._n_taps = 0 if params is None else params.n_steps
        self._heads = None
        if params is not None:
            self._heads = head_vm_pu(params, np.arange(-params.n_steps, params.n_steps + 1))

    @property
    def on(self) -> bool:
        """Whether the feeder has an LTC."""
        return self.params is not None

    def reset(self, batch: int) -> TapChangerState:
        """``batch`` LTCs at the tap the AVC settles on from neutral."""
        return TapChangerState(
            np.full(batch, self.start_tap, dtype=np.int64),
            np.zeros(batch, dtype=np.int64),
            np.zeros(batch, dtype=np.int64),
        )

    def head_vm_pu(self, tap: np.ndarray) -> np.ndarray | None:
        """Head voltage [B] at taps ``tap`` [B] (p.u.; ``None`` without an LTC: the case's)."""
        if self._heads is None:
            return None
        return self._heads.take(tap + self._n_taps)  # taps stay in range: clipped when moved

    def _regulated(self, flow: Any, head: np.ndarray) -> np.ndarray:
        vm = flow.vm_pu[:, 0]
        if not self.params.has_ldc:  # type: ignore[union-attr]
            return vm
        s = (flow.info["feeder_p_mw"] + 1j * flow.info["feeder_q_mvar"]) / self.base_mva
        current = np.conj(s / head)
        return regulated_voltage_pu(self.params, flow.v_complex_pu[:, 0], current)  # type: ignore[arg-type]

    def solve(
        self,
        grid: Any,
        p_mw: np.ndarray,
        q_mvar: np.ndarray,
        v_init: np.ndarray | None,
        state: TapChangerState,
        target: np.ndarray | None = None,
    ) -> tuple[Any, TapChangerState, np.ndarray]:
        """The step's flow of ``grid`` (a :class:`~powerzoo.tasks.feeder.FeederModel`) at net
        demand ``p_mw`` / ``q_mvar`` [B, n_bus] with the tap in the loop (module docstring);
        ``target`` [B]: tap positions set by the action (the AVC bypassed). Returns the flow
        (its info with :data:`LTC_INFO_KEYS`), the new LTC state and the step's operations [B]."""
        b = p_mw.shape[0]
        if self.params is None:
            flow = grid.solve(p_mw, q_mvar, v_init)
            zeros = np.zeros(b, dtype=np.int64)
            return self._with_info(flow, state.tap, zeros, grid.case.slack_vm_pu), state, zeros
        params = self.params
        if target is not None:
            state, moves = tap_changer_set(params, state, target)
            head = self.head_vm_pu(state.tap)
            flow = grid.solve(p_mw, q_mvar, v_init, head_vm_pu=head)
            ops = np.abs(moves)
            return self._with_info(flow, state.tap, ops, head), state, ops
        start_ops = state.operations
        head = self.head_vm_pu(state.tap)
        flow = grid.solve(p_mw, q_mvar, v_init, head_vm_pu=head)
        state, moves = avc_step(params, state, self._regulated(flow, head), self.step_s)
        if not _count_nonzero(moves):  # the tap held: the flow is the step's
            return self._with_info(flow, state.tap, moves, head), state, moves
        budget = params.max_operations(self.step_s) - np.abs(moves)
        for _ in range(AVC_ROUNDS - 1):
            rows = np.flatnonzero(moves)
            if not rows.size:
                break
            head = self.head_vm_pu(state.tap)
            flow, sub = _resolve(grid, p_mw, q_mvar, flow, rows, head)
            follow = np.zeros(b, dtype=np.int64)
            follow[rows] = avc_moves(
                params, state.tap[rows], self._regulated(sub, head[rows]), 2 * params.n_steps
            )
            follow = np.clip(follow, -budget, budget)
            budget = budget - np.abs(follow)
            state = TapChangerState(
                state.tap + follow, state.timer, state.operations + np.abs(follow)
            )
            moves = follow
        if np.any(moves):  # the last round moved: its flow is at the tap it left
            head = self.head_vm_pu(state.tap)
            flow, _ = _resolve(grid, p_mw, q_mvar, flow, np.flatnonzero(moves), head)
        ops = state.operations - start_ops
        return self._with_info(flow, state.tap, ops, self.head_vm_pu(state.tap)), state, ops

    @staticmethod
    def _with_info(flow: Any, tap: np.ndarray, ops: np.ndarray, head: Any) -> Any:
        """``flow`` (fresh from the step's solve: its info is the step's own) with
        :data:`LTC_INFO_KEYS` added to its info."""
        info = flow.info
        b = tap.shape[0]
        info["ltc_tap"] = tap.astype(np.float64)
        info["ltc_operations"] = ops.astype(np.float64)
        if not (isinstance(head, np.ndarray) and head.shape == (b,)):
            head = np.broadcast_to(np.asarray(head, dtype=np.float64), (b,)).copy()
        info["head_vm_pu"] = head
        return flow


def _resolve(
    grid: Any, p_mw: np.ndarray, q_mvar: np.ndarray, flow: Any, rows: np.ndarray, head: np.ndarray
) -> tuple[Any, Any]:
    """``flow`` with rows ``rows`` solved again at head voltages ``head[rows]`` (p.u.), warm
    started from their last voltages; returns the merged flow and that of the rows alone."""
    sub = grid.solve(p_mw[rows], q_mvar[rows], flow.v_complex_pu[rows], head_vm_pu=head[rows])
    return _merge(flow, rows, sub), sub


def _merge(flow: Any, rows: np.ndarray, sub: Any) -> Any:
    """``flow`` with rows ``rows`` replaced by those of ``sub`` (a flow of those rows)."""
    vm = np.array(flow.vm_pu)
    vm[rows] = sub.vm_pu
    vc = np.array(flow.v_complex_pu)
    vc[rows] = sub.v_complex_pu
    loss = np.array(flow.p_loss_mw)
    loss[rows] = sub.p_loss_mw
    costs = np.array(flow.costs)
    costs[rows] = sub.costs
    info = {}
    for key, value in flow.info.items():
        merged = np.array(value)
        merged[rows] = sub.info[key]
        info[key] = merged
    return dataclasses.replace(
        flow, vm_pu=vm, v_complex_pu=vc, p_loss_mw=loss, costs=costs, info=info
    )
