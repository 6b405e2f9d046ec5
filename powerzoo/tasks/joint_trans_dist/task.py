"""The coupled transmission-distribution model: generator and battery agents, one DC power flow
and one exact feeder power flow per feeder each step (:mod:`powerzoo.tasks.joint_trans_dist`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.inverter_battery import (
    InverterBatteryParams,
    inverter_battery_reset,
    inverter_battery_settlement,
    inverter_battery_step,
)
from powerzoo.devices.tap_changer import TapChangerParams
from powerzoo.physics.dc_opf import dispatch_cost
from powerzoo.physics.dc_power_flow import (
    generation_shift_matrix,
    line_overload_mw,
    ptdf_matrix,
)
from powerzoo.scratch import ROW_BLOCK
from powerzoo.tasks.balancing import RegulationBand
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.feeder import FeederModel, time_features
from powerzoo.tasks.joint_trans_dist.baselines import JointBaselines
from powerzoo.tasks.joint_trans_dist.boundary import Boundary, LmpTable
from powerzoo.tasks.joint_trans_dist.spec import (
    FORECAST_STEPS,
    FeederHookup,
    JointParams,
    Slots,
    idle_tables,
    joint_spec,
    merit_order_price,
)
from powerzoo.tasks.spec import TaskSpec
from powerzoo.tasks.transmission import congestion_ready_case, marginal_cost_per_mwh

__all__ = ["JointTransDist", "JointTransDistWeek", "JointState", "merit_order_price"]


@dataclasses.dataclass
class JointState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_p_mw: np.ndarray  # [B, n_gen + n_bat] last applied output (generators, batteries)
    prev_imbalance_mw: np.ndarray  # [B] last mismatch (generation - load)
    soc: np.ndarray  # [B, n_bat] state of charge
    vm_pu: np.ndarray  # [B, buses of every feeder] last flows' voltage magnitudes
    v_complex_pu: np.ndarray  # [B, buses of every feeder] last flows' voltages (warm start)
    feeder_p_mw: np.ndarray  # [B, n_feeders] last flows' head power


class JointTransDist(JointBaselines, Task):
    """Generators dispatch a transmission case while feeder batteries trade at the boundary bus's
    price; the feeders' head power is load on their boundary buses.
    ## Description
    The PJM 5-bus case (DC flow, 5 generator agents) with 120 copies of the IEEE 33-bus feeder
    (exact AC flow, 3 battery agents of 2 MWh / 0.5 MW, each copy's batteries doing the same:
    180 MW / 720 MWh) behind bus 3; each step the feeders' head power is load on that bus, their
    head voltage follows a Thevenin equivalent of the transmission network at bus 3, and the
    batteries are settled at bus 3's day-ahead LMP (DC-OPF with congestion).
    ## Action
    Generators: ``p_mw`` in ``[Pmin, Pmax]``; batteries: ``p_mw`` in [-0.5, 0.5] MW (+ discharge,
    one copy's).
    ## Observation
    Every agent every field (0 where it does not apply; one-hot kind): time, expected price, own
    block, the system block and every battery's SOC (mode ``global``); also ``local`` and
    ``local_plus_forecast``.
    ## Reward
    One team reward, $ per step: ``-(generation + imbalance + regulation cost + overload x 2,000
    $/MWh + battery wear)`` plus, on the last step, the batteries' settlement. The mismatch within
    the regulation band (1 % of the split year's peak load: 11.1 MW) is settled at 2 x the units'
    highest marginal cost (80 $/MWh), beyond it at 1,000 $/MWh.
    ## Costs
    ``thermal_overload``, ``power_imbalance`` (MWh beyond the band; ``info["regulation_mwh"]``
    within it), ``voltage_violation``, ``feeder_thermal_overload``, ``soc_violation``; budgets per
    day x the episode's days.
    ## Starting state
    Batteries at SOC 0.5, generators' last output 0, at 00:00 of the split day.
    ## Episode end
    Truncated at the horizon (48 steps; 336 on the week preset); no early termination.
    ## Arguments
    ``load_scale``, ``feeder_load_scale``, ``imbalance_price_per_mwh``,
    ``overload_penalty_per_mwh``, ``energy_mwh``, ``power_mw``, ``tou_steps``, ``oracle_margin_pu``,
    ``oracle_line_margin`` (0), ``head_mean_vm_pu`` (1.02), ``regulation_share`` (0.01),
    ``regulation_price_per_mwh``
    (``None``: 2 x the highest marginal cost).
    ## Baselines
    Random; rule-based; oracle (one LP over transmission and distribution); ``separate``
    (transmission first, then the feeders at its LMPs); ``flex_idle`` (the batteries idle, a
    DC-OPF per step).
    """

    task_id: ClassVar[str] = "joint_trans_dist"
    case_name: ClassVar[str] = "case5"
    feeders: ClassVar[tuple[FeederHookup, ...]] = (
        FeederHookup("case33bw", 3, (16, 23, 31), copies=120),
    )
    horizon: ClassVar[int] = 48
    description: ClassVar[str] = (
        "Five generator agents dispatch the PJM 5-bus system (DC power flow) and three battery "
        "agents run the batteries of 120 IEEE 33-bus feeders (exact AC power flow) behind bus "
        "3, settled at its LMP, over one day: one team reward, the system's cost."
    )
    Params = JointParams
    step_block_rows = ROW_BLOCK  # the feeder flows' work arrays stay in the caches
    # True: each boundary bus's transmission load is its case load less its feeder's base load
    # (the bus's total unchanged with the batteries idle); False: the feeder's load is added
    net_feeder_load: ClassVar[bool] = True
    # True: an on-load tap changer at each substation holds its feeder's head near 1.025 p.u.
    # (powerzoo.tasks.joint_trans_dist.boundary); False: a fixed tap (head_mean_vm_pu)
    head_ltc: ClassVar[bool] = False

    @classmethod
    def spec_for(cls, params: JointParams) -> TaskSpec:
        return joint_spec(
            cls.task_id,
            cls.description,
            congestion_ready_case(cls.case_name),
            cls.feeders,
            cls.horizon,
            params,
        )

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        super().__init__(self.spec_for(p), split)
        self.case = case = congestion_ready_case(self.case_name)
        self.n_gen = case.n_gen
        self.marginal_cost = marginal_cost_per_mwh(case)
        steps = self.profiles.steps_per_day
        self.demand = self.profiles.series["demand_pu"]
        self.day_start = self.split_days * steps
        self.bus_load_scale = case.bus_pd_mw * p.load_scale  # MW per unit of demand_pu
        self.gsf = generation_shift_matrix(case)  # [n_gen, n_branch]
        self.ptdf_t = np.ascontiguousarray(ptdf_matrix(case).T)  # [n_bus, n_branch]
        self.rating = case.branch_rate_a_mw
        self.grids = [
            FeederModel(
                f.case_name, self.profiles, self.split_days, p.feeder_load_scale, self.spec.dt_h
            )
            for f in self.feeders
        ]
        sizes = [len(f.battery_buses) for f in self.feeders]
        self.n_bat = sum(sizes)
        self.copies = np.asarray([f.copies for f in self.feeders], dtype=np.float64)
        # each battery's feeder and its feeder's copies
        self.bat_feeder = np.repeat(np.arange(len(self.feeders)), sizes)
        self.bat_copies = self.copies.take(self.bat_feeder)
        edges = np.cumsum([0, *sizes])
        self.bat_slices = [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
        bus_edges = np.cumsum([0, *(g.n_bus for g in self.grids)])
        self.bus_slices = [slice(a, b) for a, b in zip(bus_edges[:-1], bus_edges[1:], strict=True)]
        self.boundary = np.asarray([f.boundary_bus for f in self.feeders])
        # the share of the transmission load at each bus (the rule spreads the system load so)
        self.load_share = case.bus_pd_mw / case.bus_pd_mw.sum()
        if self.net_feeder_load:  # each boundary bus's own load less its feeders' base load
            for grid, bus, n in zip(self.grids, self.boundary, self.copies, strict=True):
                self.bus_load_scale[bus] -= n * grid.bus_p_mw.sum()
            if np.any(self.bus_load_scale < 0.0):
                raise ValueError(
                    f"{self.task_id}: a feeder's base load exceeds its boundary bus's load; "
                    "lower feeder_load_scale or hang the feeder at a bigger load bus"
                )
            self.load_share = self.bus_load_scale / self.bus_load_scale.sum()
        self.battery = InverterBatteryParams(
            energy_capacity_mwh=p.energy_mwh,
            power_max_mw=p.power_mw,
            n_units=self.n_bat,
            degradation_cost_per_mwh=p.degradation_cost_per_mwh,
        )
        # per calendar step: one copy of each feeder's head power with its batteries idle (MW),
        # and the day-ahead LMPs (powerzoo.tasks.joint_trans_dist.boundary)
        scenario = calendar.scenario_of_split(split)
        self.idle_head = np.stack(
            [idle_tables(scenario, f.case_name, p.feeder_load_scale)[0] for f in self.feeders],
            axis=1,
        )
        self.lmp = LmpTable(self)
        ltc = TapChangerParams() if self.head_ltc else None
        self.boundary_model = Boundary(self, p.head_mean_vm_pu, ltc)
        # regulation band: a share of the split year's peak load, the feeders' head power included
        peak = (self.demand * self.bus_load_scale.sum() + self.idle_head @ self.copies).max()
        self.regulation = RegulationBand(
            p.regulation_share * float(peak), p.regulation_price_on(case), p.imbalance_price_per_mwh
        )
        self.time_table = time_features(np.arange(self.horizon + 1), steps, self.horizon)
        self._settle: dict[int, np.ndarray] = {}
        self._build_tou_plan(steps)
        self._bat_bus_load = np.concatenate(
            [
                g.bus_p_mw[list(f.battery_buses)]
                for g, f in zip(self.grids, self.feeders, strict=True)
            ]
        )
        self._bat_vm_index = np.concatenate(
            [
                np.asarray(f.battery_buses) + s.start
                for f, s in zip(self.feeders, self.bus_slices, strict=True)
            ]
        )
        self._offsets = np.arange(1, FORECAST_STEPS + 1)
        self._build_observation()

    def _build_observation(self) -> None:
        """The observation's constant blocks and the columns the rule reads."""
        self._kind = np.zeros((len(self.spec.agents), 2), np.float32)
        self._kind[: self.n_gen, 0] = 1.0
        self._kind[self.n_gen :, 1] = 1.0
        self.build_obs_slots(Slots.of)
        glob = self.spec.observation
        self._col = {n: glob.slot(n) for n in ("time_remaining", "own_soc", "price_per_mwh")}
        self._col["system"] = glob.slot("system_load_mw")
        self._col["idle"] = glob.slot("feeder_idle_p_mw")
        # the bus whose day-ahead LMP each agent sees: a unit's bus, a battery's boundary bus
        self.agent_bus = np.concatenate(
            [self.case.gen_bus, self.boundary.take(self.bat_feeder)]
        ).astype(np.int64)

    def price_of(self, total_load_mw: np.ndarray) -> np.ndarray:
        """The system's network-blind uniform price ($/MWh) [B] at demand ``total_load_mw``
        [B] (MW): :func:`merit_order_price` with the imbalance price above the units'
        capacity."""
        return merit_order_price(
            self.case, self.marginal_cost, total_load_mw, self.params.imbalance_price_per_mwh
        )

    def boundary_price(self, flat: np.ndarray) -> np.ndarray:
        """Day-ahead LMP ($/MWh) [B, n_feeders] at each feeder's boundary bus at calendar
        steps ``flat`` [B] (:class:`~powerzoo.tasks.joint_trans_dist.boundary.LmpTable`)."""
        return self.lmp.at(flat)[:, self.boundary]

    # ---- calendar -------------------------------------------------------------------------
    def flat_index(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Calendar step [B] of step ``t`` of the episodes started on split days ``day_id``."""
        return (self.day_start.take(day_id) + t) % self.demand.size

    def settlement_price(self, day_id: np.ndarray) -> np.ndarray:
        """Price ($/MWh) [B, n_feeders] settling the stored energy of each feeder's batteries:
        the mean day-ahead LMP at its boundary bus over the episode's steps."""
        out = np.empty((np.size(day_id), len(self.feeders)))
        for row, d in enumerate(np.asarray(day_id, dtype=np.int64).ravel().tolist()):
            if d not in self._settle:
                flat = self.flat_index(np.full(self.horizon, d), np.arange(self.horizon))
                self._settle[d] = self.boundary_price(flat).mean(axis=0)
            out[row] = self._settle[d]
        return out

    def transmission_loads(self, demand: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """Bus loads [B, n_bus] (MW) of the DC flow: the case's loads at ``demand`` [B] (p.u.)
        plus each feeder's head power ``heads`` [B, n_feeders] (MW) at its boundary bus."""
        load = demand[:, None] * self.bus_load_scale
        for i, bus in enumerate(self.boundary):
            load[:, bus] += heads[:, i]
        return load

    def head_voltage_pu(self, flat: np.ndarray, battery_p_mw: np.ndarray) -> np.ndarray:
        """Each feeder's head voltage [B, n_feeders] (p.u.) at calendar steps ``flat`` [B] with
        the batteries delivering ``battery_p_mw`` [B, n_bat] (MW per copy, + discharge):
        :meth:`~powerzoo.tasks.joint_trans_dist.boundary.Boundary.head_voltage_pu` at each copy's
        idle head power less its batteries' output."""
        out = np.add.reduceat(battery_p_mw, [s.start for s in self.bat_slices], axis=1)
        draw = self.idle_head.take(flat, axis=0) - out
        return self.boundary_model.head_voltage_pu(self.demand.take(flat), draw)

    def feeder_flows(
        self, flat: np.ndarray, battery_p_mw: np.ndarray, v_init: np.ndarray | None
    ) -> tuple[list[Any], np.ndarray]:
        """Each feeder's exact power flow (:meth:`FeederModel.solve`, one copy) at calendar
        steps ``flat`` [B] with its batteries delivering ``battery_p_mw`` [B, n_bat] (MW, +
        discharge), its head at :meth:`head_voltage_pu`; and those head voltages [B,
        n_feeders]."""
        demand = self.demand.take(flat)
        head = self.head_voltage_pu(flat, battery_p_mw)
        flows = []
        for i, (grid, f, bats, buses) in enumerate(
            zip(self.grids, self.feeders, self.bat_slices, self.bus_slices, strict=True)
        ):
            p, q = grid.bus_loads(demand)
            p[:, list(f.battery_buses)] -= battery_p_mw[:, bats]
            warm = None if v_init is None else v_init[:, buses]
            flows.append(grid.solve(p, q, warm, head_vm_pu=head[:, i]))
        return flows, head

    # ---- batched model --------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> JointState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        t = np.zeros(b, np.int64)
        flat = self.flat_index(day_id, t)
        self.lmp.ensure(self.flat_index(day_id[:, None], np.arange(self.horizon + 1)[None, :]))
        flows, _ = self.feeder_flows(flat, np.zeros((b, self.n_bat)), None)
        return JointState(
            day_id,
            t,
            np.zeros((b, self.n_gen + self.n_bat)),
            np.zeros(b),
            inverter_battery_reset(self.battery, b),
            np.concatenate([f.vm_pu for f in flows], axis=1),
            np.concatenate([f.v_complex_pu for f in flows], axis=1),
            np.stack([f.info["feeder_p_mw"] for f in flows], axis=1) * self.copies,
        )

    def observe(self, state: JointState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, n_agents, obs_dim] (float32) of ``obs_mode``."""
        slots = self.slots_of_mode(obs_mode)
        b, g = state.t.size, self.n_gen
        flat = self.flat_index(state.day_id, state.t)
        demand = self.demand.take(flat)
        obs = np.zeros((b, len(self.spec.agents), slots.width), dtype=np.float32)
        self._write_shared_fields(obs, slots, state, flat, demand)
        obs[:, :, slots.kind] = self._kind
        own = obs[:, :, slots.own]  # min, max, marginal cost, prev p, soc, v, bus load
        own[:, :g, 0] = self.case.gen_pmin_mw
        own[:, :g, 1] = self.case.gen_pmax_mw
        own[:, :g, 2] = self.marginal_cost
        own[:, g:, 0] = -self.params.power_mw
        own[:, g:, 1] = self.params.power_mw
        own[:, :, 3] = state.prev_p_mw
        own[:, g:, 4] = state.soc
        own[:, g:, 5] = state.vm_pu[:, self._bat_vm_index]
        own[:, :g, 6] = demand[:, None] * self.bus_load_scale[self.case.gen_bus]
        own[:, g:, 6] = demand[:, None] * self._bat_bus_load
        obs[:, :, slots.own] = own
        return obs

    def _write_shared_fields(
        self, obs: np.ndarray, slots: Any, state: JointState, flat: np.ndarray, demand: np.ndarray
    ) -> None:
        """Write into ``obs`` [B, n_agents, width] the fields every agent sees alike, where the
        mode's ``slots`` has them: time, expected price [$/MWh], the system block (loads [MW],
        imbalance [MW], voltage extremes [p.u.]), every battery's SOC and the price forecast;
        ``flat`` [B]: calendar steps, ``demand`` [B]: their ``demand_pu``."""
        try:
            obs[:, :, slots.time] = self.time_table.take(state.t, axis=0)[:, None, :]
        except IndexError:  # stepped past the horizon without a reset
            steps = self.profiles.steps_per_day
            obs[:, :, slots.time] = time_features(state.t, steps, self.horizon)[:, None, :]
        obs[:, :, slots.price] = self.lmp.at(flat)[:, self.agent_bus]
        if slots.system is not None:
            nxt = self.demand.take((flat + 1) % self.demand.size)
            total, vm = self.bus_load_scale.sum(), state.vm_pu
            idle = self.idle_head.take(flat, axis=0) @ self.copies
            loads = (demand * total, nxt * total, idle, state.feeder_p_mw.sum(axis=1))
            row = np.stack([*loads, state.prev_imbalance_mw, vm.min(axis=1), vm.max(axis=1)], 1)
            obs[:, :, slots.system] = row[:, None, :]
        if slots.socs is not None:
            obs[:, :, slots.socs] = state.soc[:, None, :]
        if slots.forecast is not None:
            ahead = self.lmp.at(((flat[:, None] + self._offsets) % self.demand.size).ravel())
            ahead = ahead.reshape(flat.size, self._offsets.size, -1)[:, :, self.agent_bus]
            obs[:, :, slots.forecast] = ahead.transpose(0, 2, 1)

    def step(
        self, state: JointState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[JointState, StepOutput]:
        dt_h, p = self.spec.dt_h, self.params
        b, g = state.t.size, self.n_gen
        flat = self.flat_index(state.day_id, state.t)
        demand = self.demand.take(flat)
        gen = action[:, :g]
        bat = inverter_battery_step(
            self.battery, state.soc, action[:, g:], np.zeros((b, self.n_bat)), dt_h
        )
        flows, head_vm = self.feeder_flows(flat, bat.p_mw, state.v_complex_pu)
        # AC side: one copy's head power x the copies
        heads = np.stack([f.info["feeder_p_mw"] for f in flows], axis=1) * self.copies
        load = self.transmission_loads(demand, heads)  # DC side
        flow = gen @ self.gsf - load @ self.ptdf_t
        overload_mw = line_overload_mw(self.case, flow).sum(axis=1)
        total_load = load.sum(axis=1)
        total_generation = gen.sum(axis=1)
        imbalance = total_generation - total_load
        balance = self.regulation.settle(imbalance, dt_h)
        generation = dispatch_cost(self.case, gen) * dt_h
        price = self.boundary_price(flat)  # [B, n_feeders]
        wear = self.battery.degradation_cost_per_mwh * (bat.charge_mwh + bat.discharge_mwh)
        terms = np.empty((b, 6))
        terms[:, 0] = -generation
        terms[:, 1] = -balance.imbalance_cost
        terms[:, 2] = -balance.regulation_cost
        terms[:, 3] = -overload_mw * dt_h * p.overload_penalty_per_mwh
        terms[:, 4] = -wear @ self.bat_copies
        terms[:, 5] = 0.0
        end = state.t + 1 == self.horizon
        if end.any():  # the last step: settle each battery's stored energy against its start
            settle = self.settlement_price(state.day_id[end])
            settled = np.empty((int(end.sum()), self.n_bat))
            for i, bats in enumerate(self.bat_slices):
                at_i = inverter_battery_settlement(self.battery, bat.soc[end], settle[:, i])
                settled[:, bats] = at_i[:, bats]
            terms[end, 5] = settled @ self.bat_copies
        costs = np.empty((b, 5))
        costs[:, 0] = overload_mw * dt_h
        costs[:, 1] = balance.imbalance_mwh  # beyond the regulation band
        costs[:, 2] = sum(f.costs[:, 0] for f in flows)
        costs[:, 3] = sum(f.costs[:, 1] for f in flows)
        costs[:, 4] = bat.soc_violation_mwh.sum(axis=1)
        loss_mw = np.stack([f.p_loss_mw for f in flows], axis=1) * self.copies  # [B, F]
        losses = loss_mw.sum(axis=1)
        vm = np.concatenate([f.vm_pu for f in flows], axis=1)
        applied = np.concatenate([gen, bat.p_mw], axis=1)
        sold = (bat.discharge_mwh - bat.charge_mwh) * self.bat_copies
        battery_revenue = (price.take(self.bat_feeder, axis=1) * sold).sum(axis=1)
        loss_cost = (price * loss_mw).sum(axis=1) * dt_h
        transmission_cost = -terms[:, :4].sum(axis=1)
        new_state = JointState(
            state.day_id,
            state.t + 1,
            applied,
            imbalance,
            bat.soc,
            vm,
            np.concatenate([f.v_complex_pu for f in flows], axis=1),
            heads,
        )
        info = {
            "boundary_price_per_mwh": price,
            "head_vm_pu": head_vm,
            "feeder_p_mw": heads,
            "boundary_load_mw": load[:, self.boundary]
            - demand[:, None] * self.bus_load_scale[self.boundary],
            "total_load_mw": total_load,
            "total_generation_mw": total_generation,
            "imbalance_mw": imbalance,
            "slack_p_mw": -imbalance,
            "regulation_mwh": balance.regulation_mwh,  # within the band
            "generation_cost": generation,
            "max_branch_loading": (np.abs(flow) / self.rating).max(axis=1),
            "p_loss_mw": losses,
            "v_min_pu": vm.min(axis=1),
            "v_max_pu": vm.max(axis=1),
            "pf_converged": np.logical_and.reduce([f.info["pf_converged"] for f in flows]),
            "soc": bat.soc,
            "battery_p_mw": bat.p_mw,
            "transmission_cost": transmission_cost,
            "boundary_payment": (price * heads).sum(axis=1) * dt_h,
            "battery_revenue": battery_revenue,
            "loss_cost": loss_cost,
            "distribution_profit": battery_revenue + terms[:, 4] + terms[:, 5] - loss_cost,
        }
        return new_state, StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=costs,
            terminated=np.zeros(b, dtype=bool),
            action_applied=applied,
            info=info,
        )


class JointTransDistWeek(JointTransDist):
    """Preset ``joint_trans_dist_7d``: ``joint_trans_dist`` over a week (336 half-hours);
    cost budgets x 7.
    """

    task_id = "joint_trans_dist_7d"
    horizon = 336
    description = (
        "Five generator agents dispatch the PJM 5-bus system (DC power flow) and three battery "
        "agents run the batteries of 120 IEEE 33-bus feeders (exact AC power flow) behind bus "
        "3, settled at its LMP, over one week: one team reward, the system's cost."
    )
