"""``joint_trans_dist_118``: the coupled model of :mod:`powerzoo.tasks.joint_trans_dist` at the
scale of the IEEE 118-bus system, with area agents on the transmission side and one distribution
system operator (DSO) agent per feeder.

Model (multi-agent, 30-minute steps, 48 per episode); what differs from ``joint_trans_dist``:

* Transmission: ``case118`` (54 units, 186 rated branches,
  :func:`powerzoo.tasks.transmission.congestion_ready_case`) under DC power flow, bus loads = the
  case's base load x ``load_scale = 1.1`` x ``demand_pu`` as ``opf_118``, plus the feeders at
  the boundary buses (below). Its quadratic costs enter the reward exactly (``c2 p^2 + c1 p +
  c0``).
* Feeders (:attr:`JointTransDist118.feeders`): three distribution areas of ``case33bw`` copies
  (each copy's loads at ``feeder_load_scale = 0.75``: 2.79 MW and 1.73 Mvar at ``demand_pu =
  1``, batteries at its buses 16, 23, 31 as ``marl_der_arbitrage``), hung at the three load
  pockets of case118 whose import binds when load grows behind them (0-based; MATPOWER numbers
  one higher):

  - 123 copies at bus 59 (343 MW of feeders at ``demand_pu = 1``; 184.5 MW / 738 MWh of
    batteries), fed through the 138 kV line 59-60 (216.8 MW);
  - 105 copies at bus 77 (293 MW; 157.5 MW / 630 MWh), behind the 138 kV line 76-77;
  - 129 copies at bus 3 (359 MW; 193.5 MW / 774 MWh), behind the 138 kV line 3-4 and the
    345/138 kV transformer 8-5 (branch 7-4, 300 MW) that feeds that area.

  Each copy runs as one (:class:`~powerzoo.tasks.joint_trans_dist.spec.FeederHookup`), with
  the batteries of ``joint_trans_dist`` (2 MWh / 0.5 MW, wear 7.5 $/MWh). The feeders are load
  grown behind these buses, added to the case's own (``net_feeder_load = False``): 995 MW
  (21 % of the case's load) and 535.5 MW / 2,142 MWh of batteries in all. With the batteries
  idle, on the test split's 3,120 half-hours (day-ahead DC-OPF): the transformer 8-5 binds on
  73 % of them, line 59-60 on 59 %, line 3-4 on 43 %, line 76-77 on 13 %; bus 59's LMP passes
  45 $/MWh on every day (90 $/MWh at a median day's peak), buses 77 and 3 on 27 and 31 of
  the 65 days, all three reach 1,000-1,770 $/MWh (overload priced) on the summer peak days, and
  the flows leave the ratings on 16 days; the other buses' LMPs stay within 22-97 $/MWh (1st
  to 99th percentile). Only buses with a short-circuit level of 3,100-3,300 MVA were chosen
  (a weaker one, e.g. bus 85 at 800 MVA, cannot carry 300 MW of feeders in the voltage band).
* Head voltage: an on-load tap changer at each substation (``head_ltc = True``,
  :mod:`powerzoo.tasks.joint_trans_dist.boundary`) sets each half-hour the tap that puts the
  head nearest 1.025 p.u. on the Thevenin voltage of its boundary bus (0.92-1.00 p.u. over the
  test split, up to 0.06 p.u. within a day: a fixed tap cannot hold 300 MW of feeders at a
  138 kV bus within the band). The taps reach +16 on 13 % of the test steps (the peaks), where
  the heads fall to 0.99 p.u.
* Agents: ``area_0 .. area_5`` (group ``transmission``): one per control area of case118
  (:func:`powerzoo.physics.areas.control_areas`, ``n_areas = 6``: 9, 7, 10, 9, 10 and 9 units),
  each setting the output ``p_mw`` of each of its units in ``[Pmin, Pmax]``, as ``opf``;
  ``dso_0 .. dso_2`` (group ``distribution``): one per feeder, setting each of its batteries'
  ``p_mw`` in ``[-0.5, 0.5]`` (+ discharge). Every agent's action has the same length, the
  largest area's unit count (10 slots): an agent with fewer units or batteries leaves its last
  entries unused (bounds ``[0, 1]``, ignored, reported as 0 in ``action_applied``).
* Coupling, price, reward, costs and ``info``: as ``joint_trans_dist``, with one entry per
  feeder in ``info["feeder_p_mw"]`` and ``info["boundary_load_mw"]`` [B, 3] (each feeder's exact
  AC head power x its copies and the load it adds at its boundary bus in the same step's DC
  flow), ``info["head_vm_pu"]`` and ``info["boundary_price_per_mwh"]`` [B, 3]: each feeder's
  head voltage (the Thevenin equivalent at its own boundary bus, which every feeder's draw
  moves) and its own boundary bus's day-ahead LMP (the DC-OPF of case118 at the expected
  loads, quadratic costs exact), computed a calendar day at a time when an episode first
  needs it (about 0.4 s a day). Area agents observe the LMP at their largest unit's bus, DSO
  agents at their boundary bus.
* Observation modes (every agent the same fields, 0 where they do not apply; one-hot
  ``is_area`` / ``is_feeder``): ``local``: time, kind, expected price, ``own_load_mw`` (an area:
  the transmission load of its buses; a DSO: its feeder's head power with the batteries idle),
  ``own_min_mw`` / ``own_max_mw``, ``own_head_p_mw`` (a DSO: its feeder's head power last
  step), ``own_v_min_pu`` / ``own_v_max_pu`` (a DSO: its feeder's voltage extremes last step),
  then per slot ``slot_k_max_mw``, ``slot_k_marginal_cost_per_mwh``, ``slot_k_prev_p_mw``,
  ``slot_k_soc`` and ``slot_k_v_pu`` (a battery's bus voltage); ``global`` (default): ``local``
  + the system block of ``joint_trans_dist`` (feeder figures summed over the feeders, voltage
  extremes over every feeder) and every battery's SOC; ``local_plus_forecast``: ``local`` + the
  expected price of the next 4 steps.
* Baselines: random; rule-based (time-of-use batteries and the congestion-aware merit order
  against the observed transmission load plus the feeders' expected import,
  :meth:`~powerzoo.tasks.joint_trans_dist.baselines.JointBaselines.rule_dispatch`); oracle: one
  LP per episode with the three feeders joined (:func:`.oracle.plan_episode`; the quadratic
  costs as secants of 16 segments), then a DC-OPF per step against the exact head powers;
  ``separate`` and ``flex_idle`` as ``joint_trans_dist``. The oracle's LP plans the branch
  flows within 97.5 % of their ratings (``oracle_line_margin = 0.025``: the feeders' losses,
  held at their idle value in the plan, move the pockets' flows by up to about that).
  Measured on the whole test split (65 days, ``benchmarks/compute_baselines.py``; $ of system
  cost per day): oracle -2,415,080, within every budget on every day; ``flex_idle`` -2,547,392,
  over the thermal budget on 14 days (41.5 MVAh/day of overload: 83,000 of its 132,000 $/day gap
  to the oracle, the rest congestion cost); ``separate`` -3,033,816, over budget on every day
  (its price-taking batteries charge in the cheapest day-ahead hours into the pockets' import
  limits). So ``distribution_effect_pct`` 5.19 and ``joint_gain_pct`` 20.4. The effect sits on
  the high-load days: 1-29 % on the 22 days whose peak is above about 0.84 of the year's,
  -0.02 to 0.4 % on the 43 others (the price spread there barely pays a round trip's losses and
  wear).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import numpy as np

from powerzoo.physics.areas import ControlAreas, control_areas, dispatchable_units
from powerzoo.physics.cases import NetworkCase
from powerzoo.tasks.base import StepOutput
from powerzoo.tasks.feeder_observation import FeederSlots, price_forecast_fields
from powerzoo.tasks.joint_trans_dist.spec import (
    _BIG,
    FORECAST_STEPS,
    FeederHookup,
    JointParams,
    head_power_high_mw,
    joint_spec,
)
from powerzoo.tasks.joint_trans_dist.task import JointState, JointTransDist
from powerzoo.tasks.spec import AgentGroup, TaskSpec, VectorSpec, mode_spec_fields, padded_action
from powerzoo.tasks.transmission import congestion_ready_case, marginal_cost_per_mwh

__all__ = ["JointAreaParams", "JointTransDist118"]

SLOT_FIELDS = ("max_mw", "marginal_cost_per_mwh", "prev_p_mw", "soc", "v_pu")


@dataclasses.dataclass(frozen=True)
class JointAreaParams(JointParams):
    """:class:`~powerzoo.tasks.joint_trans_dist.spec.JointParams` and the number of control
    areas (one transmission agent each)."""

    n_areas: int = 6
    # the feeders' losses, held at their idle value in the plan, move the pockets' flows by up
    # to about 2.5 % of their ratings when the batteries charge at full power
    oracle_line_margin: float = 0.025

    def __post_init__(self) -> None:
        super().__post_init__()
        if int(self.n_areas) < 1:
            raise ValueError(f"n_areas must be >= 1, got {self.n_areas!r}")


@functools.lru_cache(maxsize=8)
def _areas(case_name: str, n_areas: int) -> ControlAreas:
    return control_areas(congestion_ready_case(case_name), n_areas)


def _n_slots(areas: ControlAreas, feeders: tuple[FeederHookup, ...]) -> int:
    return max(areas.max_units, *(len(f.battery_buses) for f in feeders))


def _fields(
    case: NetworkCase, params: JointParams, n_slots: int, n_bat: int, head_hi: float
) -> dict[str, tuple]:
    """Per-agent observation rows of each mode (see the module docstring)."""
    pmax = float(case.gen_pmax_mw.max())
    total = float(case.gen_pmax_mw.sum())
    mc_hi = float(marginal_cost_per_mwh(case).max()) * 1.5
    load_hi = float(case.total_load_mw * params.load_scale * 1.3)
    p = params.power_mw
    common = (
        ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
        ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
        ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
        ("is_area", "one-hot", 0.0, 1.0, 0.0, 1.0),
        ("is_feeder", "one-hot", 0.0, 1.0, 0.0, 1.0),
        ("price_per_mwh", "$/MWh (day-ahead LMP)", -_BIG, _BIG, 0.0, mc_hi),
        ("own_load_mw", "MW (area load or feeder idle head power)", -_BIG, _BIG, 0.0, load_hi),
        ("own_min_mw", "MW", -total, total, -p * n_slots, total),
        ("own_max_mw", "MW", -total, total, 0.0, total),
        ("own_head_p_mw", "MW (feeder head power, last step)", -_BIG, _BIG, 0.0, head_hi),
        ("own_v_min_pu", "p.u. (feeder, last step)", 0.0, 1.2, 0.0, 1.0),
        ("own_v_max_pu", "p.u. (feeder, last step)", 0.0, 1.2, 0.0, 1.0),
    )
    slot_rows = {
        "max_mw": ("MW", 0.0, pmax, 0.0, pmax),
        "marginal_cost_per_mwh": ("$/MWh", 0.0, _BIG, 0.0, mc_hi),
        "prev_p_mw": ("MW (+ into the grid)", -pmax, pmax, -p, pmax),
        "soc": ("fraction", 0.0, 1.0, 0.0, 1.0),
        "v_pu": ("p.u.", 0.0, 1.2, 0.0, 1.0),
    }
    slots = tuple(
        (f"slot_{k}_{name}", *slot_rows[name]) for k in range(n_slots) for name in SLOT_FIELDS
    )
    system = (
        ("system_load_mw", "MW (transmission buses)", -_BIG, _BIG, 0.0, load_hi),
        ("system_load_next_mw", "MW (transmission buses)", -_BIG, _BIG, 0.0, load_hi),
        ("feeder_idle_p_mw", "MW (head powers, batteries idle)", -_BIG, _BIG, 0.0, head_hi),
        ("feeder_p_mw", "MW (head powers, last step)", -_BIG, _BIG, 0.0, head_hi),
        ("prev_imbalance_mw", "MW", -_BIG, _BIG, -pmax, pmax),
        ("v_min_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
        ("v_max_pu", "p.u.", 0.0, 1.2, 0.9, 1.0),
    )
    socs = tuple((f"soc_battery_{k}", "fraction", 0.0, 1.0, 0.0, 1.0) for k in range(n_bat))
    forecast = tuple(
        (name, unit, -_BIG, _BIG, 0.0, mc_hi)
        for name, unit, *_ in price_forecast_fields(FORECAST_STEPS)
    )
    local = common + slots
    return {
        "global": local + system + socs,
        "local": local,
        "local_plus_forecast": local + forecast,
    }


def area_spec(
    task_id: str,
    description: str,
    case: NetworkCase,
    feeders: tuple[FeederHookup, ...],
    horizon: int,
    params: JointAreaParams,
) -> TaskSpec:
    """The spec of a coupled task with one agent per control area and one per feeder."""
    base = joint_spec(task_id, description, case, feeders, horizon, params)
    areas = _areas(case.name, int(params.n_areas))
    n_slots = _n_slots(areas, feeders)
    entries: dict[str, list] = {
        f"area_{a}": [
            (f"area_{a}.gen_{g}.p_mw", "MW", case.gen_pmin_mw[g], case.gen_pmax_mw[g])
            for g in members.tolist()
        ]
        for a, members in enumerate(areas.units)
    }
    bat = 0
    for i, f in enumerate(feeders):
        entries[f"dso_{i}"] = [
            (
                f"dso_{i}.battery_{bat + j}.p_mw",
                "MW (+ discharge)",
                -params.power_mw,
                params.power_mw,
            )
            for j in range(len(f.battery_buses))
        ]
        bat += len(f.battery_buses)
    area_agents = tuple(f"area_{a}" for a in range(areas.n_areas))
    dso_agents = tuple(f"dso_{i}" for i in range(len(feeders)))
    return dataclasses.replace(
        base,
        agents=area_agents + dso_agents,
        action=padded_action(entries, n_slots),
        agent_groups=(
            AgentGroup("transmission", area_agents, "control areas: [p_mw of each unit]"),
            AgentGroup("distribution", dso_agents, "feeders: [p_mw of each battery]"),
        ),
        **mode_spec_fields(
            _fields(case, params, n_slots, bat, head_power_high_mw(feeders)), "global"
        ),
    )


@dataclasses.dataclass(frozen=True)
class AreaSlots(FeederSlots):
    """Where the fields of one observation mode sit (``None``: not in the mode)."""

    kind: slice  # is_area, is_feeder
    own: slice  # own_load_mw .. own_v_max_pu (6 fields)
    per_slot: slice  # slot_0_max_mw .. the last slot's v_pu
    system: slice | None
    socs: slice | None
    forecast: slice | None

    @staticmethod
    def task_slots(spec: VectorSpec) -> dict[str, Any]:
        last_slot = [n for n in spec.names if n.startswith("slot_")][-1]
        socs = tuple(n for n in spec.names if n.startswith("soc_battery_"))
        ahead = tuple(n for n in spec.names if n.startswith("price_t"))
        system = spec.optional_slot("system_load_mw", "v_max_pu")
        return {
            "kind": spec.slot("is_area", "is_feeder"),
            "own": slice(spec.slot("own_load_mw"), spec.slot("own_v_max_pu") + 1),
            "per_slot": slice(spec.slot("slot_0_max_mw"), spec.slot(last_slot) + 1),
            "system": None
            if system is None
            else slice(spec.slot("system_load_mw"), spec.slot("v_max_pu") + 1),
            "socs": spec.slot(*socs) if len(socs) > 1 else None,
            "forecast": spec.slot(*ahead) if ahead else None,
        }


class JointTransDist118(JointTransDist):
    """case118 dispatched by area agents while DSO agents run the batteries of three feeders
    hung at its load buses.

    ## Description
    The coupled model of ``joint_trans_dist`` at the scale of the IEEE 118-bus case (54 units,
    quadratic costs, the ratings of ``opf_118``, DC flow) with three distribution areas of IEEE
    33-bus feeders (an exact AC flow each) grown behind the load pockets of case118 (0-based):
    123 copies at bus 59, 105 at bus 77 and 129 at bus 3 (343, 293 and 359 MW of feeders at
    ``demand_pu = 1``, on top of the case's load), with 184.5, 157.5 and 193.5 MW of 4-hour
    batteries. Their imports bind (line 59-60, lines 76-77 and 3-4, the 345/138 kV transformer
    8-5): the boundary buses' day-ahead LMPs reach 1,000-1,770 $/MWh on the summer peak days
    while the case's other buses stay near its units' costs, and with the batteries idle the
    flows leave the ratings on the high-load days. An on-load tap changer at each substation
    holds its feeder's head near 1.025 p.u.

    ## Action
    ``area_0 .. area_5`` (group ``transmission``): the output ``p_mw`` of each unit of the control
    area in ``[Pmin, Pmax]``; ``dso_0 .. dso_2`` (group ``distribution``): each battery's ``p_mw``
    in [-0.5, 0.5] MW (+ discharge). Every agent has 10 entries (the largest area); unused ones have
    bounds [0, 1] and are ignored.

    ## Observation
    Every agent the same fields (0 where they do not apply; one-hot ``is_area`` / ``is_feeder``):
    ``local``: time, kind, expected price, own load and limits, a DSO's head power and voltage
    extremes, then per slot its limit, marginal cost, last output, SOC and bus voltage; ``global``
    (default) adds the system block and every battery's SOC; ``local_plus_forecast`` adds the
    expected price of the next 4 steps.

    ## Reward
    One team reward, $ per step, as ``joint_trans_dist``: ``-(generation + imbalance + regulation
    cost + overload x 2,000 $/MWh + battery wear)`` plus the batteries' settlement on the last
    step: the mismatch within the regulation band (1 % of the split year's peak load: 56.7 MW) at
    2 x the units' highest marginal cost (560 $/MWh), beyond it at 1,000 $/MWh. Each feeder's
    batteries are settled at its boundary bus's day-ahead LMP.

    ## Costs
    As ``joint_trans_dist``: ``thermal_overload``, ``power_imbalance`` (beyond the regulation
    band), ``voltage_violation``, ``feeder_thermal_overload``, ``soc_violation``.

    ## Starting state
    Batteries at SOC 0.5, units' last output 0, at 00:00 of the split day.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``n_areas`` (6) and the keywords of ``joint_trans_dist``: ``load_scale``,
    ``feeder_load_scale``, ``imbalance_price_per_mwh``, ``overload_penalty_per_mwh``,
    ``energy_mwh``, ``power_mw``, ``tou_steps``, ``oracle_margin_pu``, ``oracle_line_margin``
    (0.025 here: the oracle plans the flows within 97.5 % of the ratings), ``regulation_share``,
    ``regulation_price_per_mwh``.

    ## Baselines
    Random; rule-based (time-of-use batteries and the congestion-aware merit order against the
    observed load plus the feeders' expected import); oracle: one LP per episode with the three
    feeders joined, then a DC-OPF per step against the exact head powers; ``separate``
    (transmission first, then the feeders at its LMPs); ``flex_idle`` (batteries idle). On the
    whole test split the oracle keeps every budget and costs 5.2 % less than ``flex_idle`` and
    20.4 % less than ``separate`` (1-29 % less than ``flex_idle`` on the 22 high-load days).
    """

    task_id: ClassVar[str] = "joint_trans_dist_118"
    case_name: ClassVar[str] = "case118"
    feeders: ClassVar[tuple[FeederHookup, ...]] = (
        FeederHookup("case33bw", 59, (16, 23, 31), copies=123),
        FeederHookup("case33bw", 77, (16, 23, 31), copies=105),
        FeederHookup("case33bw", 3, (16, 23, 31), copies=129),
    )
    horizon: ClassVar[int] = 48
    net_feeder_load: ClassVar[bool] = False
    head_ltc: ClassVar[bool] = True
    description: ClassVar[str] = (
        "Six control-area agents dispatch the IEEE 118-bus system (DC power flow) and three DSO "
        "agents run the batteries of 357 IEEE 33-bus feeders (exact AC power flow, 536 MW of "
        "batteries) in the load pockets at buses 59, 77 and 3, over one day: one team reward, "
        "the system's cost."
    )
    Params = JointAreaParams

    @classmethod
    def spec_for(cls, params: JointAreaParams) -> TaskSpec:
        case = congestion_ready_case(cls.case_name)
        return area_spec(cls.task_id, cls.description, case, cls.feeders, cls.horizon, params)

    def _build_observation(self) -> None:
        self.areas = areas = _areas(self.case_name, int(self.params.n_areas))
        n_area, n_feed = areas.n_areas, len(self.feeders)
        n_agents, slots = n_area + n_feed, _n_slots(areas, self.feeders)
        self.n_area, self.n_slots = n_area, slots
        # joint action entry and flat output column ([gen..., battery...]) of every used slot
        entry, column = [], []
        self._slot_column = np.zeros((n_agents, slots), np.int64)
        self._slot_battery = np.zeros((n_agents, slots), np.int64)
        self._slot_unit = np.zeros((n_agents, slots), bool)
        self._slot_bat = np.zeros((n_agents, slots), bool)
        for a, members in enumerate(areas.units):
            entry += (a * slots + np.arange(members.size)).tolist()
            column += members.tolist()
            self._slot_column[a, : members.size] = members
            self._slot_unit[a, : members.size] = True
        for i, bats in enumerate(self.bat_slices):
            k = np.arange(bats.start, bats.stop)
            entry += ((n_area + i) * slots + np.arange(k.size)).tolist()
            column += (self.n_gen + k).tolist()
            self._slot_column[n_area + i, : k.size] = self.n_gen + k
            self._slot_battery[n_area + i, : k.size] = k
            self._slot_bat[n_area + i, : k.size] = True
        self._entry, self._column = np.asarray(entry), np.asarray(column)
        self._fixed = np.concatenate([self.case.gen_pmin_mw, np.zeros(self.n_bat)])
        self._slot_vm = self._bat_vm_index.take(self._slot_battery)
        self.dispatchable = dispatchable_units(self.case)
        member = np.zeros((self.case.n_bus, n_area))
        member[np.arange(self.case.n_bus), areas.bus_area] = 1.0
        self._area_load_scale = self.bus_load_scale @ member  # [n_area] MW per p.u.
        self.build_obs_slots(AreaSlots.of)
        self._const = {}
        for mode, s in self.obs_slots.items():  # the fields that never change
            const = np.zeros((n_agents, s.width), np.float32)
            const[:n_area, s.kind.start] = 1.0
            const[n_area:, s.kind.start + 1] = 1.0
            own = s.own.start
            const[:n_area, own + 1] = [self.case.gen_pmin_mw[u].sum() for u in areas.units]
            const[:n_area, own + 2] = [self.case.gen_pmax_mw[u].sum() for u in areas.units]
            n_bats = np.asarray([b.stop - b.start for b in self.bat_slices])
            const[n_area:, own + 1] = -self.params.power_mw * n_bats
            const[n_area:, own + 2] = self.params.power_mw * n_bats
            per = const[:, s.per_slot].reshape(n_agents, slots, len(SLOT_FIELDS))
            cols = self._slot_column[:n_area]
            per[:n_area, :, 0] = np.where(self._slot_unit[:n_area], self.case.gen_pmax_mw[cols], 0)
            per[:n_area, :, 1] = np.where(self._slot_unit[:n_area], self.marginal_cost[cols], 0)
            per[n_area:, :, 0] = np.where(self._slot_bat[n_area:], self.params.power_mw, 0.0)
            self._const[mode] = const
        self._slot_bat_f = self._slot_bat.astype(np.float64)
        self._slot_used_f = (self._slot_unit | self._slot_bat).astype(np.float64)
        glob = self.spec.observation
        self._col = {n: glob.slot(n) for n in ("time_remaining", "price_per_mwh")}
        self._col["system"] = glob.slot("system_load_mw")
        self._col["idle"] = glob.slot("feeder_idle_p_mw")
        self._col["socs"] = glob.slot("soc_battery_0")
        # the bus whose day-ahead LMP each agent sees: an area's largest unit's, a DSO's
        # boundary bus
        largest = [u[np.argmax(self.case.gen_pmax_mw[u])] for u in areas.units]
        self.agent_bus = np.concatenate(
            [self.case.gen_bus[np.asarray(largest)], self.boundary]
        ).astype(np.int64)

    # ---- joint action <-> outputs ---------------------------------------------------------
    def flat_action(self, action: np.ndarray) -> np.ndarray:
        """Joint action [B, n_agents x slots] -> outputs [B, n_gen + n_bat] (MW; units, then
        batteries; units that cannot be dispatched at ``Pmin``)."""
        out = np.broadcast_to(self._fixed, (action.shape[0], self._fixed.size)).copy()
        out[:, self._column] = np.asarray(action, dtype=np.float64)[:, self._entry]
        return out

    def joint_action(self, outputs: np.ndarray) -> np.ndarray:
        """Outputs [..., n_gen + n_bat] (MW) -> the joint action [..., n_agents x slots] (unused
        entries 0)."""
        outputs = np.asarray(outputs, dtype=np.float64)
        out = np.zeros(outputs.shape[:-1] + (self.spec.action.dim,))
        out[..., self._entry] = outputs[..., self._column]
        return out

    def plan_actions(self, outputs: np.ndarray) -> np.ndarray:
        """Planned outputs [..., n_gen + n_bat] (MW) as joint actions (:meth:`joint_action`)."""
        return self.joint_action(outputs)

    def describe_areas(self) -> dict[str, Any]:
        """Each area agent's units and each DSO agent's feeder, boundary bus and battery
        buses."""
        out: dict[str, Any] = {f"area_{a}": u.tolist() for a, u in enumerate(self.areas.units)}
        for i, f in enumerate(self.feeders):
            out[f"dso_{i}"] = dataclasses.asdict(f)
        return out

    # ---- batched model --------------------------------------------------------------------
    def observe(self, state: JointState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, n_agents, obs_dim] (float32) of ``obs_mode``."""
        slots = self.slots_of_mode(obs_mode)
        mode = obs_mode or self.spec.default_obs_mode
        b, a = state.t.size, self.n_area
        flat = self.flat_index(state.day_id, state.t)
        demand = self.demand.take(flat)
        obs = np.empty((b, len(self.spec.agents), slots.width), dtype=np.float32)
        obs[:] = self._const[mode]
        self._write_shared_fields(obs, slots, state, flat, demand)
        own = slots.own.start
        idle = self.idle_head.take(flat, axis=0)
        obs[:, :a, own] = demand[:, None] * self._area_load_scale
        obs[:, a:, own] = idle * self.copies
        obs[:, a:, own + 3] = state.feeder_p_mw
        vm = state.vm_pu
        for i, buses in enumerate(self.bus_slices):
            obs[:, a + i, own + 4] = vm[:, buses].min(axis=1)
            obs[:, a + i, own + 5] = vm[:, buses].max(axis=1)
        per = obs[:, :, slots.per_slot].reshape(b, -1, self.n_slots, len(SLOT_FIELDS))
        per[:, :, :, 2] = state.prev_p_mw[:, self._slot_column] * self._slot_used_f
        per[:, :, :, 3] = state.soc[:, self._slot_battery] * self._slot_bat_f
        per[:, :, :, 4] = vm[:, self._slot_vm] * self._slot_bat_f
        return obs

    def step(
        self, state: JointState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[JointState, StepOutput]:
        new_state, out = super().step(state, self.flat_action(action), rng)
        applied = self.joint_action(out.action_applied)
        return new_state, dataclasses.replace(out, action_applied=applied)

    # ---- baselines ------------------------------------------------------------------------
    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """:meth:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist.rule_dispatch` read from
        ``global`` observations [B, n_agents, d], as a joint action [B, n_agents x slots]."""
        c, row = self._col, obs[:, 0].astype(np.float64)
        n_bat = self.n_bat
        return self.joint_action(
            self.rule_dispatch(
                row[:, c["time_remaining"]],
                obs[:, self.n_area :, c["price_per_mwh"]].astype(np.float64),
                row[:, c["socs"] : c["socs"] + n_bat],
                row[:, c["system"]],
                row[:, c["idle"]],
            )
        )
