"""What the transmission side gives each boundary bus of the coupled tasks: the day-ahead LMP
(a DC-OPF with congestion at the expected loads) and the head voltage of its feeders (a
Thevenin equivalent of the transmission network there, then the substation transformer).

* **Price**: per calendar step, the DC-OPF (:func:`powerzoo.physics.dc_opf.solve_dc_opf`, line
  limits soft at the overload price) of the step's transmission loads plus every feeder's idle
  head power x its copies; its locational marginal prices ``lambda + congestion`` at every bus
  (:class:`LmpTable`), computed a calendar day at a time when first asked for and kept.
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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.physics.ac_network import ac_network
from powerzoo.physics.dc_opf import solve_dc_opf
from powerzoo.physics.thevenin import thevenin_at

__all__ = [
    "SUBSTATION_MVA",
    "SUBSTATION_Z_PU",
    "SUBSTATION_X_OVER_R",
    "Boundary",
    "LmpTable",
]

SUBSTATION_MVA = 10.0  # each feeder's substation transformer rating (MVA; a 12.47 kV feeder)
SUBSTATION_Z_PU = 0.08  # its short-circuit impedance on its own rating (p.u.)
SUBSTATION_X_OVER_R = 10.0  # its X/R ratio


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
        penalty = self.task.params.overload_penalty_per_mwh
        return solve_dc_opf(self.task.case, loads, soft_line_penalty=penalty).lmp_per_mwh

    def ensure(self, flat: np.ndarray) -> None:
        """Compute the days of calendar steps ``flat`` not yet in the table."""
        days = np.unique(np.asarray(flat, dtype=np.int64) // self.steps % self.n_days)
        missing = [int(d) for d in days if int(d) not in self._days]
        if not missing:
            return
        steps = (np.asarray(missing)[:, None] * self.steps + np.arange(self.steps)).ravel()
        lmp = self.solve(self.loads(steps)).reshape(len(missing), self.steps, -1)
        for d, day in zip(missing, lmp, strict=True):
            day.setflags(write=False)
            self._days[d] = day

    def at(self, flat: np.ndarray) -> np.ndarray:
        """LMPs [B, n_bus] ($/MWh) at calendar steps ``flat`` [B]."""
        flat = np.asarray(flat, dtype=np.int64) % (self.n_days * self.steps)
        self.ensure(flat)
        day, step = np.divmod(flat, self.steps)
        return np.stack([self._days[int(d)][s] for d, s in zip(day, step, strict=True)])


class Boundary:
    """The head voltage of every feeder of a coupled task (module docstring)."""

    def __init__(self, task: Any, head_mean_vm_pu: float) -> None:
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
        self.tap = np.ones(self.copies.size)
        idle = self.head_voltage_pu(task.demand, task.idle_head)  # at tap 1
        drop = self.r_pu * task.idle_head + self.x_pu * task.demand[:, None] * self.feeder_q_scale
        self.tap = (float(head_mean_vm_pu) + drop.mean(axis=0)) / (idle + drop).mean(axis=0)

    def head_voltage_pu(self, demand: np.ndarray, draw_mw: np.ndarray) -> np.ndarray:
        """Each feeder's head voltage [B, n_feeders] (p.u.) at ``demand`` [B] (``demand_pu``)
        with each copy of each feeder drawing ``draw_mw`` [B, n_feeders] (MW)."""
        q_copy = demand[:, None] * self.feeder_q_scale  # [B, F] Mvar per copy
        p_bus = self.task.transmission_loads(demand, draw_mw * self.copies)
        q_bus = demand[:, None] * self.bus_q_scale
        np.add.at(q_bus, (slice(None), self.task.boundary), q_copy * self.copies)
        v_bus = self.thevenin.voltage_pu(p_bus, q_bus)
        return self.tap * v_bus - self.r_pu * draw_mw - self.x_pu * q_copy

    def head_sensitivity_pu_per_mw(self) -> np.ndarray:
        """``d V_head / d(draw per copy)`` [n_feeders] (p.u. per MW) of each feeder's head
        voltage to its own copies' draw (the Thevenin's self term x copies, and the
        transformer)."""
        k = self.thevenin.p_sensitivity_pu_per_mw[np.arange(self.copies.size), self.task.boundary]
        return self.tap * k * self.copies - self.r_pu
