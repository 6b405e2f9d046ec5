"""What the distribution-feeder tasks share: bus loads from the data layer, one power flow per step,
the grid costs and the grid info keys.

Loads
-----
Every bus of the feeder draws its published base demand (``bus_pd_mw``, ``bus_qd_mvar`` of the
case file, so each bus keeps its own power factor) times the calendar load shape of the data
layer times a task's ``load_scale``::

    p_load[b, bus] = bus_pd_mw[bus] * load_scale * demand_pu(day, t)

``demand_pu`` (:mod:`powerzoo.data.profiles`) is a Southeast-US system-load shape by hour of
day and day type, with a lagged temperature response (cooling and heating) and AR(1) noise,
scaled so the year's peak is 1.0. The same calendar day gives the same MW in every split;
stress splits read their own transformed profile (``load_stress``: demand x 1.15).

Power flow and costs
--------------------
One exact AC power flow per step (:func:`powerzoo.physics.radial_pf.radial_power_flow`,
backward/forward sweep over the whole batch, warm-started from the previous step's voltages),
the head at the voltage of its on-load tap changer (:mod:`powerzoo.tasks.feeder_ltc`; a task
without one, or with ``ltc=False``, at the case's 1.00 p.u.).
Net demand per bus = loads - DER injections (negative = export). Costs, both >= 0 and per step:

* ``voltage_violation`` [p.u.]: ``sum over buses of max(0.95 - v, 0) + max(v - 1.05, 0)``;
* ``thermal_overload`` [MVAh]: the overload energy above the ratings summed over branches,
  ``sum_k max(|S_k| - S_rated_k, 0) x dt`` with ``|S_k| - S_rated_k = (I_k / I_rated_k - 1) x
  S_rated_k``, the current above each line's ampacity expressed in MVA at the base voltage
  (ratings derived by the rule of :mod:`powerzoo.physics.feeder`), times the step's hours: the
  same quantity and unit as on the transmission tasks.

A row whose power flow does not converge (``pf_converged = False``; only far beyond the
feeder's loadability) is never an exception: it is charged ``voltage_violation =
NONCONVERGED_VOLTAGE_PU_PER_BUS x (n_bus - 1)`` (as if every bus had collapsed 0.1 p.u. below
the band), ``thermal_overload = 0``, and its losses are taken as 0 (the last iterate is not a
solution; its voltages are reported as they are, finite).

Grid info keys (every feeder task reports them), each ``[B]``: ``pf_converged``, ``p_loss_mw``,
``feeder_p_mw``, ``feeder_q_mvar`` (power drawn at the head = loads - DER + losses),
``v_min_pu``, ``v_max_pu``, ``max_branch_loading`` (largest I / I_rated); ``is_safe`` is added
by the env from the costs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from powerzoo.data.markets import DEFAULT_MARKET, check_market
from powerzoo.devices.battery import WEAR_COST_PER_MWH
from powerzoo.devices.inverter_battery import InverterBatteryParams
from powerzoo.devices.tap_changer import TapChangerState
from powerzoo.physics.feeder import RadialFeeder
from powerzoo.physics.radial_pf import lindistflow
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.feeder_grid import (
    NONCONVERGED_VOLTAGE_PU_PER_BUS,
    V_MAX_PU,
    V_MIN_PU,
    FeederModel,
    GridStep,
    row_sum,
)
from powerzoo.tasks.feeder_ltc import FeederLtc, FeederLtcParams
from powerzoo.tasks.feeder_observation import FeederSlots
from powerzoo.tasks.transmission import OVERLOAD_PRICE_PER_MWH

__all__ = [
    "V_MIN_PU",
    "V_MAX_PU",
    "NONCONVERGED_VOLTAGE_PU_PER_BUS",
    "GRID_COSTS",
    "GRID_COST_UNITS",
    "GridStep",
    "FeederModel",
    "FeederTask",
    "FeederBatteryParams",
    "grid_cost_rows",
    "row_sum",
    "time_features",
    "child_buses",
    "voltage_sq_sensitivity",
    "add_voltage_band",
    "unit_variables",
    "ORACLE_VOLTAGE_PENALTY",
]

GRID_COSTS = ("voltage_violation", "thermal_overload")
GRID_COST_UNITS = ("p.u. (sum over buses, per step)", "MVAh (sum over branches)")
# oracles: $ per unit of squared-voltage slack outside the band (about 10,000 $ per p.u. of voltage,
# so a plan gives up any amount of profit or lost-load value before it lets a voltage leave the
# band)
ORACLE_VOLTAGE_PENALTY = 20_000.0
ORACLE_BAND_MARGIN_PU = (
    0.001  # default planned band [0.951, 1.049]: room for the linearisation error
)


def grid_cost_rows(
    voltage_pu: float,
    overload_mvah: float,
    penalty_per_pu: float = 1000.0,
    penalty_per_mvah: float = OVERLOAD_PRICE_PER_MWH,
) -> tuple[tuple[str, str, float, float], ...]:
    """The grid costs' rows of :func:`powerzoo.tasks.spec.cmdp_fields`: per-episode thresholds
    (p.u. of ``voltage_violation``, MVAh of ``thermal_overload``) and their weights in the
    ``"penalized"`` preset ($ per p.u., $ per MVAh; by default the transmission tasks' overload
    price, :data:`powerzoo.tasks.transmission.OVERLOAD_PRICE_PER_MWH`)."""
    thresholds, penalties = (voltage_pu, overload_mvah), (penalty_per_pu, penalty_per_mvah)
    return tuple(zip(GRID_COSTS, GRID_COST_UNITS, thresholds, penalties, strict=True))


@dataclasses.dataclass(frozen=True)
class FeederBatteryParams(FeederLtcParams):
    """The task keywords of a feeder task whose batteries a time-of-use rule can run (and its
    head's tap changer, :class:`~powerzoo.tasks.feeder_ltc.FeederLtcParams`)."""

    # bus loads = the case's base load x this x demand_pu (each task sets its own default)
    load_scale: float = 1.0
    # each battery's energy (MWh): a 2 h system at the feeder's scale
    energy_mwh: float = 1.0
    # each battery's power rating (MW), the action bound
    power_mw: float = 0.5
    # half-hours of charging and of discharging in the rule-based time-of-use schedule
    tou_steps: int = 8
    # the price model (powerzoo.data.markets.MARKETS)
    market: str = DEFAULT_MARKET
    # each battery's wear ($ per MWh of grid-side throughput, each leg; powerzoo.devices.battery)
    degradation_cost_per_mwh: float = WEAR_COST_PER_MWH

    def __post_init__(self) -> None:
        check_market(self.market)
        if not self.degradation_cost_per_mwh >= 0.0:
            raise ValueError(
                f"degradation_cost_per_mwh must be >= 0 $/MWh, got {self.degradation_cost_per_mwh}"
            )

    def inverter_batteries(self, n_units: int, **ratings: Any) -> InverterBatteryParams:
        """The task's ``n_units`` batteries: ``energy_mwh`` / ``power_mw`` each, with its wear
        (``ratings``: further :class:`InverterBatteryParams` fields, e.g. ``s_rating_mva``)."""
        return InverterBatteryParams(
            energy_capacity_mwh=self.energy_mwh,
            power_max_mw=self.power_mw,
            n_units=n_units,
            degradation_cost_per_mwh=self.degradation_cost_per_mwh,
            **ratings,
        )


def time_features(t: np.ndarray, steps_per_day: int, horizon: int) -> np.ndarray:
    """``[hour_sin, hour_cos, time_remaining]`` [B, 3] (float32) at episode steps ``t`` [B]."""
    phase = 2.0 * np.pi * (t % steps_per_day) / steps_per_day
    out = np.empty((t.size, 3), dtype=np.float32)
    out[:, 0] = np.sin(phase)
    out[:, 1] = np.cos(phase)
    out[:, 2] = 1.0 - t / horizon
    return out


class FeederTask(Task):
    """The skeleton every feeder task shares: the feeder and its calendar, the episode's calendar
    steps, the start of an observation and the step output with the grid info keys.

    A subclass names its :attr:`case_name` (and its :attr:`ObsSlots`), calls ``__init__`` first
    and then writes only its own model: parameters, state, transition, reward and costs.
    """

    case_name: ClassVar[str]
    """The feeder case (:func:`powerzoo.physics.cases.load_case`)."""
    ObsSlots: ClassVar[type[FeederSlots] | None] = None
    """The slots class of a task with per-agent observation modes (:attr:`obs_slots`)."""

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        """:attr:`params` from the task keywords, the spec and the split (:class:`Task`), then
        :attr:`grid` (:attr:`case_name` with bus loads x ``params.load_scale``), the time
        features of steps 0..horizon, given :attr:`ObsSlots`, the slots of every observation
        mode, and :attr:`ltc`, the head's tap changer (:mod:`powerzoo.tasks.feeder_ltc`; none
        unless the params have ``tap_changer()``)."""
        self.params = params = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(params), split)
        self.horizon = self.spec.horizon  # steps per episode
        self.grid = FeederModel(
            self.case_name, self.profiles, self.split_days, params.load_scale, self.spec.dt_h
        )
        steps = self.profiles.steps_per_day
        self.time_table = time_features(np.arange(self.horizon + 1), steps, self.horizon)
        if self.ObsSlots is not None:
            self.build_obs_slots(self.ObsSlots.of)
        make_ltc = getattr(params, "tap_changer", None)
        self.ltc = FeederLtc(
            None if make_ltc is None else make_ltc(),
            60.0 * self.spec.step_minutes,
            self.grid.case.base_mva,
        )

    def grid_reset(self, p_mw: np.ndarray, q_mvar: np.ndarray) -> tuple[GridStep, TapChangerState]:
        """The reset flow of net demand ``p_mw`` / ``q_mvar`` [B, n_bus] (MW, Mvar) and the head's
        LTC state (:meth:`FeederLtc.reset`, the head at its tap)."""
        ltc = self.ltc.reset(p_mw.shape[0])
        return self.grid.solve(p_mw, q_mvar, head_vm_pu=self.ltc.head_vm_pu(ltc.tap)), ltc

    def grid_step(
        self,
        state: Any,
        p_mw: np.ndarray,
        q_mvar: np.ndarray,
        tap_target: np.ndarray | None = None,
    ) -> tuple[GridStep, TapChangerState, np.ndarray]:
        """The step's flow with the LTC in the loop (:meth:`FeederLtc.solve`), warm-started from
        ``state.v_complex_pu``, the LTC read from ``state.ltc_tap`` / ``ltc_timer`` /
        ``ltc_operations``; ``tap_target`` [B]: the tap set by the action. Returns the flow, the
        new LTC state and the step's tap operations [B]."""
        ltc = TapChangerState(state.ltc_tap, state.ltc_timer, state.ltc_operations)
        return self.ltc.solve(self.grid, p_mw, q_mvar, state.v_complex_pu, ltc, tap_target)

    def head_vm_pu(self, state: Any, row: int) -> float | None:
        """Head voltage (p.u.) of batch row ``row`` at its tap (``None`` without an LTC): what an
        oracle plans the rest of the day at (the AVC holds the tap where the head is regulated)."""
        head = self.ltc.head_vm_pu(state.ltc_tap[row : row + 1])
        return None if head is None else float(head[0])

    def flat_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step index [B] of step ``t`` of the episode started on split day ``day_id``."""
        return self.grid.flat_index(day_id, t)

    def first_step(self, day_id: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(day_id, t, flat)`` [B] at reset: checked split days, step 0, its calendar step."""
        day_id = self.check_day_id(day_id)
        t = np.zeros(day_id.size, dtype=np.int64)
        return day_id, t, self.flat_index(day_id, t)

    def time_obs(self, t: np.ndarray) -> np.ndarray:
        """``[hour_sin, hour_cos, time_remaining]`` [B, 3] at steps ``t`` (from the table, or
        computed for a state stepped past the horizon without a reset)."""
        try:
            return self.time_table.take(t, axis=0)
        except IndexError:
            return time_features(t, self.profiles.steps_per_day, self.horizon)

    def begin_agent_observation(
        self, state: Any, obs_mode: str | None, n_agents: int
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        """The slots of ``obs_mode`` (``ValueError`` if unknown), a zeroed observation
        [B, n_agents, width] (float32) with the time features and the price filled in, and the
        calendar step of each row."""
        slots = self.slots_of_mode(obs_mode)
        flat = self.flat_index(state.day_id, state.t)
        obs = np.zeros((state.t.size, n_agents, slots.width), dtype=np.float32)
        obs[:, :, slots.time] = self.time_obs(state.t)[:, None, :]
        obs[:, :, slots.price] = self.grid.price_per_mwh.take(flat)[:, None]
        return slots, obs, flat

    def locate_neighbours(self, buses: np.ndarray) -> None:
        """The parent bus (:attr:`upstream_bus`) and the child buses of the units at ``buses``,
        read by :meth:`write_neighbour_voltages`."""
        self.upstream_bus = self.grid.case.bus_parent[buses]
        self._children = child_buses(self.grid.case, buses)
        # [n_units, most children]: each unit's children, the row padded with its first child
        # (a repeated bus leaves a minimum unchanged): one gather and one reduction per write
        widest = max(kids.size for kids in self._children)
        self._child_table = np.stack(
            [
                np.concatenate([kids, np.full(widest - kids.size, kids[0])])
                for kids in self._children
            ]
        )

    def write_neighbour_voltages(
        self, obs: np.ndarray, vm: np.ndarray, upstream: int, downstream: int
    ) -> None:
        """Write the fields of :func:`~powerzoo.tasks.feeder_observation.neighbour_fields` of
        every unit into ``obs`` [B, n_units, width] at columns ``upstream`` and ``downstream``,
        from voltages ``vm`` [B, n_bus] (p.u.)."""
        obs[:, :, upstream] = vm[:, self.upstream_bus]
        obs[:, :, downstream] = np.minimum.reduce(vm[:, self._child_table], axis=2)

    def settlement_price(self, day_id: np.ndarray) -> np.ndarray:
        """Price ($/MWh) [B] at which stored energy is settled at the end of the episodes
        started on split days ``day_id``: the mean price over the episode's steps."""
        table = getattr(self, "_settlement_price", None)
        if table is None:
            days = np.arange(self.n_days)[:, None]
            flat = self.flat_index(days, np.arange(self.horizon)[None, :])
            table = self._settlement_price = self.grid.price_per_mwh.take(flat).mean(axis=1)
        return table.take(day_id)

    def rest_of_day(self, state: Any, row: int) -> tuple[int, np.ndarray]:
        """``(t0, flat)``: row ``row``'s current step and the calendar steps from it to the
        horizon (what an oracle plans over)."""
        t0 = int(state.t[row])
        start = self.flat_index(state.day_id[row : row + 1], np.array([t0]))[0]
        return t0, start + np.arange(self.horizon - t0)

    @staticmethod
    def feeder_output(
        flow: GridStep,
        reward: np.ndarray,
        reward_terms: np.ndarray,
        constraint_costs: np.ndarray,
        action_applied: np.ndarray,
        **info: np.ndarray,
    ) -> StepOutput:
        """A step's output: never terminal, info = the grid info keys then ``info``."""
        merged = dict(flow.info)
        merged.update(info)
        return StepOutput(
            reward=reward,
            reward_terms=reward_terms,
            constraint_costs=constraint_costs,
            terminated=np.zeros(reward.shape[0], dtype=bool),
            action_applied=action_applied,
            info=merged,
        )


# ---- oracle planning on LinDistFlow ---------------------------------------------------------
def child_buses(case: RadialFeeder, buses: Any) -> list[np.ndarray]:
    """The buses fed directly from each of ``buses`` (a bus at a lateral's end stands for
    itself)."""
    children = [np.flatnonzero(case.bus_parent == b) for b in buses]
    return [c if c.size else np.array([b]) for c, b in zip(children, buses, strict=True)]


def voltage_sq_sensitivity(
    case: RadialFeeder, buses: np.ndarray, tan_phi: np.ndarray | float = 0.0
) -> np.ndarray:
    """LinDistFlow sensitivity ``d(v^2) / dP`` [n_units, n_bus] (p.u.^2 per MW, <= 0).

    Row ``k``: the change of every bus's squared voltage when the net demand at ``buses[k]``
    grows by 1 MW (and by ``tan_phi[k]`` Mvar), from :func:`powerzoo.physics.radial_pf.lindistflow`.
    """
    buses = np.asarray(buses, dtype=np.int64)
    p = np.zeros((buses.size, case.n_bus))
    p[np.arange(buses.size), buses] = 1.0
    q = p * np.broadcast_to(np.asarray(tan_phi, dtype=np.float64), (buses.size,))[:, None]
    return lindistflow(case, p, q).vm_pu ** 2 - case.slack_vm_pu**2


def unit_variables(h: Any, n_steps: int, lb: np.ndarray, ub: np.ndarray) -> Any:
    """HiGHS variables [n_steps, n_units] with per-unit bounds ``lb`` / ``ub`` [n_units] (a highspy
    array)."""
    columns = [
        h.addVariables(n_steps, lb=float(lo), ub=float(hi)) for lo, hi in zip(lb, ub, strict=True)
    ]
    return np.stack(columns, axis=1).view(type(columns[0]))


def add_voltage_band(
    h: Any,
    v2_base: np.ndarray,
    dv2: Any,
    dv2_bound: np.ndarray,
    margin_pu: float = ORACLE_BAND_MARGIN_PU,
) -> Any:
    """Soft voltage-band rows of a day plan on a HiGHS model ``h``; returns the penalty expression
    ($).

    ``v2_base`` [T, n_bus]: squared voltages of the exact power flow without control (known with
    perfect foresight); ``dv2`` [T, n_bus]: highspy expressions of the linearised change the plan
    makes (LinDistFlow sensitivities, :func:`voltage_sq_sensitivity`); ``dv2_bound`` [T, n_bus]:
    a bound on ``|dv2|``. Rows are added only where the band could be left (``v2_base +- bound``
    crosses it), with non-negative slacks priced at :data:`ORACLE_VOLTAGE_PENALTY`. The planned
    band is narrowed by ``margin_pu`` on each side (room for the linearisation error, which grows
    with the size of the planned injections).
    """
    lo = (V_MIN_PU + margin_pu) ** 2
    hi = (V_MAX_PU - margin_pu) ** 2
    penalty = None
    for sign, need in ((1.0, v2_base - dv2_bound < lo), (-1.0, v2_base + dv2_bound > hi)):
        rows = np.flatnonzero(need.ravel())
        if not rows.size:
            continue
        slack = h.addVariables(rows.size, lb=0.0)
        expr = dv2.ravel()[rows]
        base = v2_base.ravel()[rows]
        if sign > 0:  # v2_base + dv2 + slack >= lo
            h.addConstrs(expr + slack >= lo - base)
        else:  # v2_base + dv2 - slack <= hi
            h.addConstrs(expr - slack <= hi - base)
        term = ORACLE_VOLTAGE_PENALTY * h.qsum(slack)
        penalty = term if penalty is None else penalty + term
    return penalty
