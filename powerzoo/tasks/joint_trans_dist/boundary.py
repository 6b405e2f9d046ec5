"""What the transmission side gives each boundary bus of the coupled tasks: the day-ahead LMP
(a DC-OPF with congestion at the expected loads) and the head voltage of its feeders (a
Thevenin equivalent of the transmission network there, then the substation transformer).

* **Price**: per calendar step, the DC-OPF (:func:`powerzoo.physics.dc_opf.solve_dc_opf`, line
  limits soft at the overload price) of the step's transmission loads plus every feeder's idle
  head power x its copies; its locational marginal prices ``lambda + congestion`` at every bus
  (:class:`LmpTable`), computed a calendar day at a time (one DC-OPF call per day, so a day's
  prices do not depend on which days were asked for with it) when first asked for and kept.
  Each call is also kept for the process (:func:`day_ahead_lmp`): another env of the same task
  on the same day (an SB3 vector env's sub-envs, a second env, an evaluation env beside the
  training one) gets the same LMPs to the last bit without solving them again.
* **Head voltage** (:meth:`Boundary.head_voltage_pu`): the boundary bus's voltage magnitude
  from :class:`powerzoo.physics.thevenin.Thevenin` (the case's impedances, units behind their
  subtransient reactance, linearised about the case's AC solution) at the step's bus loads
  (transmission loads, active and reactive, plus every feeder's draw x its copies), times the
  substation transformer's fixed tap, less the drop across one feeder's transformer
  (:data:`SUBSTATION_MVA` MVA, :data:`SUBSTATION_Z_PU` on its rating, X/R
  :data:`SUBSTATION_X_OVER_R`) at that feeder's draw. The fixed tap of each feeder's
  transformers is set once, so that its head voltage with the batteries idle averages
  ``head_mean_vm_pu`` over the split's data year (an off-load tap set for the site; no tap
  moves during an episode). A feeder's draw is its idle head power
  (exact flow, table) less its batteries' output; its reactive draw its loads' reactive power.
  The head voltage so falls with the feeder's draw, with the boundary bus's and its neighbours'
  loads, and with the other feeders' draw at that bus (its copies).
* **On-load tap changer** (a task with ``head_ltc = True``; ``joint_trans_dist_118``): each
  substation transformer instead has an LTC (:class:`powerzoo.devices.tap_changer.
  TapChangerParams`: +-16 steps of 0.625 %, band centre 1.025 p.u.) whose controller sets, each
  half-hour, the tap that puts the head nearest the band centre (:meth:`Boundary.head_tap`; the
  controller's 45 s delay and 10 s between operations settle well within a step). The head then
  sits within half a step (0.003 p.u.) of 1.025 p.u. while the tap range lasts; the tap follows
  the transmission state, and the head leaves the band only where the tap is at its limit.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

from powerzoo.devices.tap_changer import TapChangerParams
from powerzoo.physics.ac_network import ac_network
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.thevenin import thevenin_at

__all__ = [
    "SUBSTATION_MVA",
    "SUBSTATION_Z_PU",
    "SUBSTATION_X_OVER_R",
    "Boundary",
    "LmpTable",
    "day_ahead_lmp",
]

SUBSTATION_MVA = 10.0  # each feeder's substation transformer rating (MVA; a 12.47 kV feeder)
SUBSTATION_Z_PU = 0.08  # its short-circuit impedance on its own rating (p.u.)
SUBSTATION_X_OVER_R = 10.0  # its X/R ratio
LMP_MEMO_CALLS = 512  # DC-OPF calls (days) kept by :func:`day_ahead_lmp` (least recently used go)

_lmp_memo: OrderedDict[tuple, np.ndarray] = OrderedDict()


def _case_digest(case: Any) -> str:
    """A digest of every field of a network case (its arrays' bytes, shapes and dtypes)."""
    digest = hashlib.sha256()
    for f in dataclasses.fields(case):
        value = getattr(case, f.name)
        digest.update(f.name.encode())
        if isinstance(value, np.ndarray):
            digest.update(f"{value.dtype}{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def day_ahead_lmp(case: Any, loads: np.ndarray, penalty: float) -> np.ndarray:
    """LMPs [B, n_bus] ($/MWh, read-only) of the DC-OPF of bus loads ``loads`` [B, n_bus] (MW),
    line limits soft at ``penalty`` $/MWh.

    One call's rows are solved together (each warm-starts from the previous row), so the result
    is kept for exactly this input: the same case, penalty and loads to the last bit give the
    kept array; any other input is solved. The last :data:`LMP_MEMO_CALLS` calls are kept.
    """
    loads = np.ascontiguousarray(loads, dtype=np.float64)
    key = (_case_digest(case), float(penalty), loads.shape, hashlib.sha256(loads).hexdigest())
    if key in _lmp_memo:
        _lmp_memo.move_to_end(key)
        return _lmp_memo[key]
    lmp = solve_dc_opf(case, loads, soft_line_penalty=penalty).lmp_per_mwh
    lmp.setflags(write=False)
    _lmp_memo[key] = lmp
    while len(_lmp_memo) > LMP_MEMO_CALLS:
        _lmp_memo.popitem(last=False)
    return lmp


class LmpTable:
    """Day-ahead locational marginal prices ($/MWh) [n_bus] of every calendar step of a
    task's profiles, a calendar day of DC-OPFs at a time (module docstring)."""

    def __init__(self, task: Any) -> None:
        self.task = task
        self.steps = task.profiles.steps_per_day
        self.n_days = task.demand.size // self.steps
        self._days: dict[int, np.ndarray] = {}

    def loads(self, flat: np.ndarray) -> np.ndarray:
        """Expected bus loads [len(flat), n_bus] (MW) at calendar steps ``flat``: the
        transmission loads plus every feeder's idle head power x its copies."""
        task = self.task
        return task.transmission_loads(
            task.demand.take(flat), task.idle_head.take(flat, axis=0) * task.copies
        )

    def solve(self, loads: np.ndarray) -> np.ndarray:
        """LMPs [B, n_bus] ($/MWh) of the DC-OPF of bus loads ``loads`` [B, n_bus] (MW)."""
        return day_ahead_lmp(self.task.case, loads, self.task.params.overload_penalty_per_mwh)

    def ensure(self, flat: np.ndarray) -> None:
        """Compute the days of calendar steps ``flat`` not yet in the table."""
        days = np.unique(np.asarray(flat, dtype=np.int64) // self.steps % self.n_days)
        missing = [int(d) for d in days if int(d) not in self._days]
        if not missing:
            return
        for d in missing:  # one DC-OPF call per day: a day's LMPs do not depend on the others
            self._days[d] = self.solve(self.loads(d * self.steps + np.arange(self.steps)))

    def at(self, flat: np.ndarray) -> np.ndarray:
        """LMPs [B, n_bus] ($/MWh) at calendar steps ``flat`` [B]."""
        flat = np.asarray(flat, dtype=np.int64) % (self.n_days * self.steps)
        self.ensure(flat)
        day, step = np.divmod(flat, self.steps)
        return np.stack([self._days[int(d)][s] for d, s in zip(day, step, strict=True)])


class Boundary:
    """The head voltage of every feeder of a coupled task (module docstring)."""

    def __init__(
        self, task: Any, head_mean_vm_pu: float, ltc: TapChangerParams | None = None
    ) -> None:
        case = task.case
        self.thevenin = thevenin_at(task.case_name, case, task.boundary)
        q_case = -ac_network(task.case_name).q_mvar.astype(np.float64)  # Mvar drawn
        self.bus_q_scale = q_case * task.params.load_scale  # Mvar per unit of demand_pu
        if task.net_feeder_load:
            for grid, bus, n in zip(task.grids, task.boundary, task.copies, strict=True):
                self.bus_q_scale[bus] -= n * grid.bus_q_mvar.sum()
        self.bus_q_scale = np.maximum(self.bus_q_scale, 0.0)
        self.copies = np.asarray(task.copies, dtype=np.float64)
        self.feeder_q_scale = np.asarray([g.bus_q_mvar.sum() for g in task.grids])
        base = case.base_mva
        z = SUBSTATION_Z_PU * base / SUBSTATION_MVA  # p.u. on the system base
        self.r_pu = z / np.hypot(1.0, SUBSTATION_X_OVER_R) / base  # p.u. per MW
        self.x_pu = self.r_pu * SUBSTATION_X_OVER_R  # p.u. per Mvar
        self.task = task
        self.ltc = ltc
        self.tap = np.ones(self.copies.size)
        if ltc is not None:  # the tap moves with the step (head_tap)
            return
        idle = self.head_voltage_pu(task.demand, task.idle_head)  # at tap 1
        drop = self.r_pu * task.idle_head + self.x_pu * task.demand[:, None] * self.feeder_q_scale
        self.tap = (float(head_mean_vm_pu) + drop.mean(axis=0)) / (idle + drop).mean(axis=0)

    def _bus_and_drop(self, demand: np.ndarray, draw_mw: np.ndarray) -> tuple[np.ndarray, ...]:
        """The boundary bus voltage behind each feeder [B, n_feeders] (p.u., the Thevenin
        equivalent) and the drop across one feeder's transformer [B, n_feeders] (p.u.) at
        ``demand`` [B] with each copy of each feeder drawing ``draw_mw`` [B, n_feeders] (MW)."""
        q_copy = demand[:, None] * self.feeder_q_scale  # [B, F] Mvar per copy
        p_bus = self.task.transmission_loads(demand, draw_mw * self.copies)
        q_bus = demand[:, None] * self.bus_q_scale
        np.add.at(q_bus, (slice(None), self.task.boundary), q_copy * self.copies)
        v_bus = self.thevenin.voltage_pu(p_bus, q_bus)
        return v_bus, self.r_pu * draw_mw + self.x_pu * q_copy

    def _ltc_tap(self, v_bus: np.ndarray, drop: np.ndarray) -> np.ndarray:
        """The LTC's tap positions [B, n_feeders] that put each head nearest the band centre at
        boundary voltages ``v_bus`` and transformer drops ``drop`` [B, n_feeders] (p.u.)."""
        ltc = self.ltc
        ideal = ((ltc.band_centre_pu + drop) / v_bus - 1.0) / ltc.step_pu
        return np.clip(np.rint(ideal), -ltc.n_steps, ltc.n_steps)

    def head_voltage_pu(self, demand: np.ndarray, draw_mw: np.ndarray) -> np.ndarray:
        """Each feeder's head voltage [B, n_feeders] (p.u.) at ``demand`` [B] (``demand_pu``)
        with each copy of each feeder drawing ``draw_mw`` [B, n_feeders] (MW)."""
        v_bus, drop = self._bus_and_drop(demand, draw_mw)
        if self.ltc is None:
            return self.tap * v_bus - drop
        return (1.0 + self.ltc.step_pu * self._ltc_tap(v_bus, drop)) * v_bus - drop

    def head_tap(self, demand: np.ndarray, draw_mw: np.ndarray) -> np.ndarray:
        """Each feeder's LTC tap position [B, n_feeders] (steps from neutral) at ``demand``
        [B] with each copy drawing ``draw_mw`` [B, n_feeders] (MW); a task without an LTC has
        none (``ValueError``)."""
        if self.ltc is None:
            raise ValueError(f"{self.task.spec.task_id} has fixed substation taps, no LTC")
        return self._ltc_tap(*self._bus_and_drop(demand, draw_mw))

    def head_sensitivity_pu_per_mw(self) -> np.ndarray:
        """``d V_head / d(draw per copy)`` [n_feeders] (p.u. per MW) of each feeder's head
        voltage to its own copies' draw (the Thevenin's self term x copies, and the
        transformer); 0 with an LTC, which holds the head within half a step of its band
        centre."""
        if self.ltc is not None:
            return np.zeros(self.copies.size)
        k = self.thevenin.p_sensitivity_pu_per_mw[np.arange(self.copies.size), self.task.boundary]
        return self.tap * k * self.copies - self.r_pu
