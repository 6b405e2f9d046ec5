"""The data centre itself (GPU cluster, job queue, cooling plant, server zone) at a fixed step
length.

One model behind every task that runs the ``dc_microgrid`` data centre: ``dc_microgrid`` and
``dc_microgrid_safe`` (on its own microgrid, 5-minute steps) and ``dc_scheduling`` (on a
distribution feeder, 30-minute steps). A task supplies the supply side and the reward; this
class does the compute step (GPU allocation, earliest-deadline-first service, IT power), the
cooling step (zone temperature, plant power) and the queue's advance in time (deadlines, new
arrivals, the end-of-day carry check, the queue outlook), all over a leading batch axis ``B``.
A task whose supply can fall short of the demand re-runs the step on the supply it has
(:meth:`DataCentre.within_supply`: the GPUs throttled).

The tables it builds once (see :meth:`DataCentre._build`) are the speed shortcuts of
:class:`~powerzoo.tasks.dc_microgrid.task.DCMicrogrid`: on steps where no bucket falls due and
no day ends, the drop / carry bookkeeping whose result is known to be zero is skipped and the
next arrivals are read from tables shifted by one step. Every shortcut gives the bits of the
plain formula (``tests/envs/test_speed_paths.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powerzoo.data.workload import N_BUCKETS, NO_ARRIVAL, Workload
from powerzoo.devices.cooling import CoolingParams, CoolingPlant
from powerzoo.devices.gpu_cluster import GpuCluster, GpuClusterParams
from powerzoo.devices.job_queue import QueueOutlook, carry_excess, drop_due, serve_edf
from powerzoo.devices.thermal_zone import ZoneParams, ZoneStepper

__all__ = ["DataCentre", "QueueAdvance"]


class QueueAdvance:
    """What :meth:`DataCentre.advance` returns (plain attributes, each ``[B, C]`` unless noted)."""

    __slots__ = (
        "t_next",
        "cum",
        "allowance",
        "arrived",
        "behind",
        "dropped_gpuh",
        "sla_gpuh",
        "due_1h",
        "required",
    )

    def __init__(
        self,
        t_next: np.ndarray,
        cum: np.ndarray,
        allowance: np.ndarray,
        arrived: np.ndarray,
        behind: np.ndarray,
        dropped_gpuh: np.ndarray,
        sla_gpuh: np.ndarray | None,
        due_1h: np.ndarray,
        required: np.ndarray,
    ) -> None:
        self.t_next = t_next  # [B] steps elapsed after this step (t + 1)
        self.cum = (
            cum  # [B, C, K] the queue after this step's deadlines and the next step's arrivals
        )
        self.allowance = allowance  # work due after the day that may be left at its end
        self.arrived = arrived  # new work arrived for the next step
        self.behind = behind  # work behind schedule at the day's end (0 before)
        self.dropped_gpuh = (
            dropped_gpuh  # work dropped at its deadline this episode (running total)
        )
        self.sla_gpuh = (
            sla_gpuh  # [B] GPU-h dropped + behind this step; None when it is 0 in every row
        )
        self.due_1h = due_1h  # work due by the end of the current hour
        self.required = required  # least constant allocation meeting every deadline (GPUs)


class DataCentre:
    """GPU cluster, job queue and cooling of one data centre, stepped every ``dt_h`` hours.

    ``workload``: job arrivals at the task's step length
    (:func:`powerzoo.data.workload.get_workload`);
    ``horizon``: steps per episode (one day: the deadline buckets are hours of that day).
    Pickles without its tables (several are views of the shared workload) and rebuilds them.
    """

    def __init__(
        self,
        cluster: GpuClusterParams,
        cooling: CoolingParams,
        zone: ZoneParams,
        workload: Workload,
        horizon: int,
        dt_h: float,
    ) -> None:
        if abs(horizon * dt_h - 24.0) > 1e-9 or workload.steps_per_day != horizon:
            raise ValueError(
                f"a data-centre episode is one day of the workload's steps, got {horizon} x "
                f"{dt_h} h"
            )
        zone.check_step(dt_h)
        self.cluster_params, self.cooling_params, self.zone_params = cluster, cooling, zone
        self.workload, self.horizon, self.dt_h = workload, int(horizon), float(dt_h)
        self._build()

    def __getstate__(self) -> dict[str, Any]:
        keep = ("cluster_params", "cooling_params", "zone_params", "workload", "horizon", "dt_h")
        return {key: self.__dict__[key] for key in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build()

    def _build(self) -> None:
        """The constants and tables of the step (0-d float64 constants: numpy converts a Python
        float operand on every call, which dominates on small batches)."""
        w, dt_h, horizon = self.workload, self.dt_h, self.horizon

        def f64(x: float) -> np.ndarray:
            return np.array(x, np.float64)

        n_classes = len(w.class_names)
        self.n_classes = n_classes
        self.steps_per_hour = w.steps_per_hour
        self.class_ones = np.ones(n_classes)
        due_step = w.bucket_due_step  # [K]
        steps_left = np.maximum(due_step[None, :] - np.arange(horizon + 1)[:, None], 1)
        self.inv_hours_left = 1.0 / (steps_left * dt_h)  # [t, K] (1/h), at least one step
        self.cluster = GpuCluster(self.cluster_params, n_classes)
        self.plant = CoolingPlant(self.cooling_params)
        self.zone = ZoneStepper(self.zone_params, self.cooling_params.q_max_mw, dt_h)
        self.dt, self.per_dt = f64(dt_h), f64(1.0 / dt_h)
        self.one_step = np.array(1, np.int64)  # t + 1 without converting a Python int on every call
        self.per_gpu = f64(1.0 / self.cluster_params.n_gpus)
        self.temp_max, self.zero, self.one = (
            f64(self.zone_params.temp_max_c),
            f64(0.0),
            f64(1.0),
        )
        t_next = np.arange(horizon + 2)
        # a bucket falls due (drop_due) or the day is over (no arrivals, carry check): the full path
        self.eventful = (t_next % self.steps_per_hour == 0) | (t_next >= horizon)
        self.outlook = QueueOutlook(  # by step 0..horizon + 1: reset reads row 0, step row t + 1
            self.inv_hours_left[np.minimum(t_next, horizon)],
            np.minimum(t_next // self.steps_per_hour, N_BUCKETS - 2),
            n_classes,
        )
        # by calendar step idx, row idx + 1: what arrives at the next step when it is in the same
        # day
        self.arrivals_after = w.arrival_cum_gpuh[1:]
        self.carry_after = w.arrival_carry_gpuh[1:]
        self.arrived_after = w.arrival_cum_gpuh[1:, :, -1].astype(
            np.float64
        )  # [T - 1, C]: all of a step's new work

    def initial_queue(
        self, calendar_day: np.ndarray, idx: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Queue ``cum`` [B, C, K] (GPU-h) and carry allowance [B, C] at the first step ``idx`` [B]
        (calendar step) of calendar days ``calendar_day`` [B]: last night's carry-over plus the
        first step's arrivals."""
        w = self.workload
        cum = np.cumsum(w.initial_queue_gpuh[calendar_day], axis=2)  # [B, C, K]
        cum += w.arrival_cum_gpuh.take(idx, axis=0)
        return cum, w.arrival_carry_gpuh.take(idx, axis=0)

    def compute(
        self, cum: np.ndarray, shares: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Allocate GPUs to the job classes and serve the queue earliest-deadline-first.

        ``shares`` [B, C]: requested fractions of the GPUs (scaled down when they sum above 1).
        Returns (GPUs per class [B, C], queue after service [B, C, K], GPU-h served [B, C],
        IT power [B] MW).
        """
        class_ones = self.class_ones
        gpus = self.cluster.allocate(shares)
        cum, served = serve_edf(cum, gpus * self.dt)
        allocated, busy = (
            gpus @ class_ones,
            (served @ class_ones) * self.per_dt,
        )  # sums over job classes
        return gpus, cum, served, self.cluster.it_power_mw(allocated, busy)

    def cool(
        self,
        zone_temp_c: np.ndarray,
        temp_out_c: np.ndarray,
        condenser_c: np.ndarray,
        setpoint_c: np.ndarray,
        it_mw: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(zone temperature after the step [B] deg C, cooling plant power [B] MW) under IT heat
        ``it_mw``;
        ``condenser_c`` is :meth:`CoolingPlant.condenser_temp_c` of ``temp_out_c``."""
        zone_temp, cooling_mw, _ = self.cool_parts(
            zone_temp_c, temp_out_c, condenser_c, setpoint_c, it_mw
        )
        return zone_temp, cooling_mw

    def cool_parts(
        self,
        zone_temp_c: np.ndarray,
        temp_out_c: np.ndarray,
        condenser_c: np.ndarray,
        setpoint_c: np.ndarray,
        it_mw: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`cool`'s (zone temperature deg C, cooling power MW) and the plant's operating
        point of the step, ``(COP, envelope gain MW, tracking heat MW)`` [B] each
        (:meth:`ZoneStepper.step_parts`), which :meth:`within_supply` reuses."""
        zone_temp, q_cool, envelope, tracking = self.zone.step_parts(
            zone_temp_c, temp_out_c, setpoint_c, it_mw
        )
        cop = self.plant.cop_at(condenser_c, setpoint_c)
        return zone_temp, q_cool / cop, (cop, envelope, tracking)

    def within_supply(
        self,
        cum: np.ndarray,
        gpus: np.ndarray,
        served: np.ndarray,
        it_mw: np.ndarray,
        zone_temp_c: np.ndarray,
        plant: tuple[np.ndarray, np.ndarray, np.ndarray],
        supply_mw: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The step of :meth:`compute` and :meth:`cool` re-run on ``supply_mw`` [B] (MW), less
        than the facility asks for: the GPUs are throttled.

        ``cum`` [B, C, K] is the queue before service; ``gpus``, ``served`` and ``it_mw`` are
        :meth:`compute`'s allocation, service and IT power at full supply, ``plant`` the plant's
        operating point of :meth:`cool_parts`. The cooling plant keeps tracking its setpoint for
        the IT heat that is delivered, and the IT load gets the rest: IT power ``x`` and removed
        heat ``q`` solve ``x + q / COP = supply`` with ``q = clip(x + offset, 0, q_max)`` (the
        plant's controller; ``offset`` = envelope gain + tracking heat,
        :meth:`ZoneStepper.step_parts`). The busy GPUs' work is cut in proportion to the IT power
        above that of the same allocation with nothing busy; below that the nodes
        themselves are shed (no work). If the supply cannot run even the plant with the cluster
        off, the plant gets all of it and the zone warms. Returns (queue after service, GPU-h
        served [B, C], IT power [B] MW, zone temperature after the step [B] deg C, cooling
        power [B] MW).
        """
        cop, envelope, tracking = plant
        zero, one = self.zero, self.one
        offset = envelope + tracking
        q_cool = np.minimum(
            np.minimum(
                np.maximum((supply_mw + offset) * cop / (cop + one), zero), self.zone.q_max_mw
            ),
            supply_mw * cop,
        )
        it_delivered = np.minimum(np.maximum(supply_mw - q_cool / cop, zero), it_mw)
        floor_mw = self.cluster.it_power_mw(gpus @ self.class_ones, zero)  # nothing busy
        span = it_mw - floor_mw
        has_work = span > zero
        share = np.where(
            has_work, np.minimum(np.maximum(it_delivered - floor_mw, zero), span), zero
        ) / np.where(has_work, span, one)
        cum, served = serve_edf(cum, served * share[:, None])
        zone_temp = self.zone.step_removing(zone_temp_c, envelope, it_delivered, q_cool)
        return cum, served, it_delivered, zone_temp, q_cool / cop

    def overtemperature_kh(self, zone_temp_c: np.ndarray, out: np.ndarray) -> np.ndarray:
        """K h above the zone's limit over the step, written into ``out`` [B]."""
        return np.multiply(np.maximum(zone_temp_c - self.temp_max, self.zero), self.dt, out=out)

    def queue_info(
        self,
        gpus: np.ndarray,
        served: np.ndarray,
        arrived_gpuh: np.ndarray,
        served_gpuh: np.ndarray,
        q: QueueAdvance,
    ) -> dict[str, np.ndarray]:
        """The job-queue info keys of a step: GPUs allocated and busy per class [B, C] (from
        :meth:`compute`'s ``gpus`` and ``served`` GPU-h), the episode's running totals of work
        arrived and served [B, C] (GPU-h), and from :meth:`advance`'s ``q`` the work dropped
        (running total), behind schedule and still queued [B, C] (GPU-h)."""
        return {
            "gpus_allocated": gpus,
            "gpus_busy": served * self.per_dt,
            "arrived_gpuh": arrived_gpuh,
            "served_gpuh": served_gpuh,
            "dropped_gpuh": q.dropped_gpuh,
            "behind_schedule_gpuh": q.behind,
            "queued_gpuh": q.cum[:, :, -1],
        }

    def advance(
        self,
        cum: np.ndarray,
        t: np.ndarray,
        idx: np.ndarray,
        allowance: np.ndarray,
        dropped_gpuh: np.ndarray,
    ) -> QueueAdvance:
        """Time advances from step ``t`` [B] (calendar step ``idx``): work due now is dropped (in
        place in ``cum``), then the next step's jobs arrive; at the day's end the work behind
        schedule
        is counted. ``allowance`` and ``dropped_gpuh`` [B, C] are the state's running values."""
        w = self.workload
        t_next = t + self.one_step
        try:
            eventful = np.count_nonzero(self.eventful.take(t_next))
            next_row = t_next
        except IndexError:  # stepped on past the horizon without a reset
            next_row = np.minimum(t_next, self.horizon + 1)
            eventful = True
        sla = None
        if eventful:  # a bucket falls due or the day is over in some row
            dropped = drop_due(cum, t_next, self.steps_per_hour)
            in_day = t_next < self.horizon
            idx_next = np.where(in_day, idx + 1, NO_ARRIVAL)
            arrivals = w.arrival_cum_gpuh.take(idx_next, axis=0)  # [B, C, K] cumulative increments
            cum += arrivals
            allowance = allowance + w.arrival_carry_gpuh.take(idx_next, axis=0)
            arrived = arrivals[:, :, -1]
            behind = carry_excess(cum, allowance) * ~in_day[:, None]
            sla = (dropped + behind) @ self.class_ones
            dropped_gpuh = dropped_gpuh + dropped
        # most steps: nothing falls due, every row stays in its day (the lines above, shortened)
        else:
            cum += self.arrivals_after.take(idx, axis=0)
            allowance = allowance + self.carry_after.take(idx, axis=0)
            arrived = self.arrived_after.take(idx, axis=0)
            behind = np.zeros(allowance.shape)
            dropped_gpuh = dropped_gpuh.copy()
        due_1h, required = self.outlook(cum, next_row, allowance)
        return QueueAdvance(
            t_next, cum, allowance, arrived, behind, dropped_gpuh, sla, due_1h, required
        )
