"""The baselines of the coupled tasks (:mod:`powerzoo.tasks.joint_trans_dist`): the rule, and
the plans of the oracle, ``separate`` and ``flex_idle`` (:mod:`.oracle`), as a mixin of
:class:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.profiles import get_profiles
from powerzoo.physics.redispatch import congestion_aware_dispatch
from powerzoo.tasks.joint_trans_dist.spec import STEP_MINUTES, idle_tables
from powerzoo.tasks.tariffs import tou_battery_power_mw, tou_mode

__all__ = ["JointBaselines"]


class JointBaselines:
    """The rule-based action and the episode plans of a coupled task (attributes of
    :class:`~powerzoo.tasks.joint_trans_dist.task.JointTransDist`)."""

    def _build_tou_plan(self, steps: int) -> None:
        """The rule's time-of-use plan [n_feeders, steps] and value of a stored MWh
        [n_feeders] ($/MWh): the day-ahead LMPs at each boundary bus of the average train day
        of the base profiles (its mean demand and mean idle head powers; the same in every
        split)."""
        p = self.params
        demand = get_profiles("base", STEP_MINUTES).series["demand_pu"]
        days = calendar.split_day_indices("train")
        rows = (days[:, None] * steps + np.arange(steps)).ravel()
        mean_demand = demand.take(rows).reshape(days.size, steps).mean(axis=0)
        heads = np.stack(
            [
                idle_tables("base", f.case_name, p.feeder_load_scale)[0]
                .take(rows)
                .reshape(days.size, steps)
                .mean(axis=0)
                for f in self.feeders
            ],
            axis=1,
        )
        loads = self.transmission_loads(mean_demand, heads * self.copies)
        mean_day = self.lmp.solve(loads)[:, self.boundary].T  # [n_feeders, steps]
        order = np.argsort(mean_day, axis=1, kind="stable")
        self.tou_plan = np.zeros(mean_day.shape, dtype=np.int64)
        rows_f = np.arange(mean_day.shape[0])[:, None]
        self.tou_plan[rows_f, order[:, : p.tou_steps]] = -1
        self.tou_plan[rows_f, order[:, -p.tou_steps :]] = 1
        self.reference_price = mean_day.mean(axis=1)

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Time-of-use batteries, then a congestion-aware merit order for the generators, from
        ``global`` observations [B, n_agents, d]: [B, n_agents] MW.

        Batteries: may charge in the ``tou_steps`` half-hours whose day-ahead LMP at their
        boundary bus is lowest on the average train day and discharge in the dearest, when the
        trade pays after wear and losses against that day's mean LMP, and are back at their
        start SOC by the end (:func:`powerzoo.tasks.tariffs.tou_battery_power_mw`). Generators:
        the system load plus the feeders' idle head power and the change of head power the
        batteries' planned output makes (each feeder's exact flow at 1.00 p.u., its losses
        included, x the copies), spread over the buses by the case's load shares (the feeders'
        share at their boundary buses), dispatched by merit order with PTDF redispatch until no
        line is overloaded (:func:`powerzoo.physics.redispatch.congestion_aware_dispatch`).
        """
        g, c = self.n_gen, self._col
        first = np.asarray([s.start for s in self.bat_slices]) + g  # a battery of each feeder
        return self.rule_dispatch(
            obs[:, 0, c["time_remaining"]].astype(np.float64),
            obs[:, first, c["price_per_mwh"]].astype(np.float64),
            obs[:, g:, c["own_soc"]].astype(np.float64),
            obs[:, 0, c["system"]].astype(np.float64),
            obs[:, 0, c["idle"]].astype(np.float64),
        )

    def rule_dispatch(
        self,
        remaining: np.ndarray,
        price: np.ndarray,
        soc: np.ndarray,
        system_load_mw: np.ndarray,
        idle_head_mw: np.ndarray,
    ) -> np.ndarray:
        """The rule's outputs [B, n_gen + n_bat] (MW) from the observed fraction of the horizon
        left ``remaining`` [B], each feeder's day-ahead LMP ``price`` [B, n_feeders] ($/MWh),
        battery SOCs ``soc`` [B, n_bat], transmission load ``system_load_mw`` [B] and the
        feeders' total idle head power ``idle_head_mw`` [B] (MW); see
        :meth:`rule_based_action`."""
        steps_left = np.rint(remaining * self.horizon)
        bat = np.zeros(soc.shape)
        for i, bats in enumerate(self.bat_slices):
            mode = tou_mode(self.tou_plan[i], remaining, self.horizon, self.profiles.steps_per_day)
            bat[:, bats] = tou_battery_power_mw(
                self.battery,
                mode,
                soc,
                self.spec.dt_h,
                self.params.tou_steps,
                price[:, i],
                float(self.reference_price[i]),
                steps_left,
            )[:, bats]
        load = system_load_mw[:, None] * self.load_share
        share = self.idle_head.mean(axis=0) * self.copies
        weights = share / share.sum()
        demand = system_load_mw / self.bus_load_scale.sum()
        for i, (bus, grid, f, bats) in enumerate(
            zip(self.boundary, self.grids, self.feeders, self.bat_slices, strict=True)
        ):
            # the head power the batteries move, their feeder losses included (exact flows)
            p, q = grid.bus_loads(demand)
            idle = grid.solve(p, q).info["feeder_p_mw"]
            p[:, list(f.battery_buses)] -= bat[:, bats]
            moved = grid.solve(p, q).info["feeder_p_mw"] - idle
            load[:, bus] += idle_head_mw * weights[i] + moved * self.copies[i]
        gen = congestion_aware_dispatch(self.case, load, self.marginal_cost)
        return np.concatenate([gen, bat], axis=1)

    def plan_actions(self, outputs: np.ndarray) -> np.ndarray:
        """Actions [..., act_dim] of planned outputs [..., n_gen + n_bat] (MW; the same
        here, regrouped by agent on a task with padded agent actions)."""
        return outputs

    def _plans(self, state: Any, plan: Callable[[Any, Any, int], np.ndarray]) -> np.ndarray:
        """Actions [B, H, act_dim] of ``plan(task, state, row)`` for every row from its current
        step on (0 before it)."""
        plans = np.zeros((state.t.size, self.horizon, self.n_gen + self.n_bat))
        for row in range(state.t.size):
            plans[row, int(state.t[row]) :] = plan(self, state, row)
        return self.plan_actions(plans)

    def oracle_plan(self, state: Any) -> np.ndarray:
        """Perfect-foresight actions [B, H, n_agents]: one LP per episode
        (:func:`powerzoo.tasks.joint_trans_dist.oracle.plan_episode`)."""
        from powerzoo.tasks.joint_trans_dist.oracle import plan_episode

        return self._plans(state, plan_episode)

    def separate_plan(self, state: Any) -> np.ndarray:
        """The ``separate`` baseline's actions [B, H, n_agents]: transmission first at the
        expected boundary injections, then each feeder's batteries against the resulting LMPs
        (:func:`powerzoo.tasks.joint_trans_dist.oracle.separate_plan`)."""
        from powerzoo.tasks.joint_trans_dist.oracle import separate_plan

        return self._plans(state, separate_plan)

    def flex_idle_plan(self, state: Any) -> np.ndarray:
        """The ``flex_idle`` baseline's actions [B, H, n_agents]: the batteries idle, the
        generators at each step's DC-OPF
        (:func:`powerzoo.tasks.joint_trans_dist.oracle.flex_idle_plan`)."""
        from powerzoo.tasks.joint_trans_dist.oracle import flex_idle_plan

        return self._plans(state, flex_idle_plan)
