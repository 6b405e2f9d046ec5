"""The data centre's blocks of a perfect-foresight day plan, shared by ``dc_microgrid`` and
``dc_scheduling`` (each adds its own supply side and objective on a
:class:`~powerzoo.tasks.datacentre.sparse_model.SparseModel`). Per step ``j`` (length ``dt`` h):

* Jobs (:func:`add_job_service`): ``x[c, k, j]`` GPU-h of class ``c`` bucket ``k`` served;
  queued work per bucket ``r[c, k, j] = r[c, k, j-1] + arrivals - x >= 0``; what is left when a
  bucket falls due is dropped (``sla_violation``); at the day's end the last bucket may keep its
  carry allowance, the excess is behind schedule. ``sum x <= n_gpus dt``. The env serves each
  class earliest-deadline-first: given the plan's per-class GPUs it serves the same work per step
  and meets every deadline the plan meets (EDF is optimal for a divisible workload), so only the
  per-class totals become actions (:func:`plan_shares`).
* IT power (:func:`it_power_model`): planned GPUs are always busy (an allocated idle GPU draws
  more than a parked one), ``it = n_gpus p_parked + (p_active - p_parked) gpus``.
* Cooling (:func:`zone_trajectory`, :func:`add_cooling_rows`): the setpoint is held at
  :data:`ORACLE_SETPOINT_C`, just under the 27 deg C limit (the highest COP with no
  overtemperature); a zone that starts warmer is first brought down as fast as the setpoint range
  and the plant's capacity allow. The zone's trajectory is then fixed by the plant's controller,
  so the heat to remove is the IT power plus a known offset (envelope gains and the zone's own
  warming), and the cooling power ``max(it + offset, 0) / COP`` is an LP constraint.
"""

from __future__ import annotations

import numpy as np

from powerzoo.devices.gpu_cluster import GpuClusterParams
from powerzoo.devices.thermal_zone import setpoint_reaching, zone_step
from powerzoo.tasks.datacentre.site import DCMicrogridParams
from powerzoo.tasks.datacentre.sparse_model import SparseModel

__all__ = [
    "ORACLE_SETPOINT_C",
    "SHARE_MARGIN",
    "add_cooling_rows",
    "add_job_service",
    "it_power_model",
    "plan_shares",
    "zone_trajectory",
]

ORACLE_SETPOINT_C = 26.9  # deg C: 0.1 K below the ASHRAE A1 limit
SHARE_MARGIN = 5e-7  # fraction of GPUs added to each planned share (float32 actions lose ~6e-8)


def zone_trajectory(
    params: DCMicrogridParams,
    zone_temp_c: float,
    temp_out_c: np.ndarray,
    setpoint_c: float,
    setpoint_min_c: float,
    dt_h: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Setpoint [S], zone temperature after each step [S] and the heat [S] (MW) to remove besides
    the IT load.

    The setpoint is ``setpoint_c``, or lower (down to ``setpoint_min_c``) while the zone is above
    it: the one that brings the zone back fastest while the plant, at its capacity, could still
    remove the heat of the whole cluster busy. Uses the env's own zone model
    (:func:`~powerzoo.devices.thermal_zone.zone_step`) with an unlimited plant: the removed heat is
    affine in the IT heat, so its offset is what is removed under a probe load far above anything
    that could clip the plant at zero, minus that load. ``zone_temp_c``: the zone now (deg C);
    ``temp_out_c`` [S]: outdoor temperature of each step; ``params``: the site (its ``cluster``,
    ``cooling`` and ``zone``).
    """
    n = temp_out_c.size
    setpoint, temp, offset = np.empty(n), np.empty(n), np.empty(n)
    current = np.array([zone_temp_c])
    probe_mw = 100.0
    probe = np.full(1, probe_mw)
    offset_max = params.cooling.q_max_mw - params.cluster.p_max_mw  # room the IT heat never needs

    def advance(j: int, value: float) -> tuple[np.ndarray, float]:
        nxt, q = zone_step(
            params.zone, current, temp_out_c[j : j + 1], np.array([value]), probe, np.inf, dt_h
        )
        return nxt, q[0] - probe_mw

    for j in range(n):
        value = setpoint_c
        if current[0] > setpoint_c + 1e-6:  # cool down: land on setpoint_c if the plant allows it
            low = float(
                np.clip(
                    setpoint_reaching(params.zone, current, setpoint_c, dt_h)[0],
                    setpoint_min_c,
                    setpoint_c,
                )
            )
            if advance(j, low)[1] <= offset_max:
                value = low
            elif advance(j, setpoint_c)[1] < offset_max:  # the offset falls as the setpoint rises
                high = setpoint_c
                for _ in range(40):
                    mid = 0.5 * (low + high)
                    low, high = (mid, high) if advance(j, mid)[1] > offset_max else (low, mid)
                value = high
        setpoint[j] = value
        current, offset[j] = advance(j, value)
        temp[j] = current[0]
    return setpoint, temp, offset


def it_power_model(cluster: GpuClusterParams, dt_h: float) -> tuple[float, float]:
    """IT power of a plan: ``(MW with every GPU parked, MW per GPU-h served in a step of dt_h h)``.

    Planned GPUs are always busy (an allocated idle GPU draws more than a parked one), so
    ``it = n_gpus p_parked + (p_active - p_parked) gpus``.
    """
    return cluster.n_gpus * cluster.p_parked_kw * 1e-3, (
        cluster.p_active_kw - cluster.p_parked_kw
    ) * 1e-3 / dt_h


def add_job_service(
    model: SparseModel,
    arrivals: np.ndarray,
    bucket_due_step: np.ndarray,
    t0: int,
    carry_allowance_gpuh: np.ndarray,
    served_cost: float | np.ndarray,
    pen_sla: float,
    n_gpus: int,
    dt_h: float,
) -> tuple[list[list[np.ndarray]], list[np.ndarray]]:
    """The job model of a day plan (module docstring) on ``model``; returns the served columns.

    ``arrivals`` [S, C, K] (GPU-h): row 0 the work queued now per class and deadline bucket, later
    rows the new arrivals of each step; ``bucket_due_step`` [K];
    ``t0`` the plan's first episode step; ``carry_allowance_gpuh`` [C]; ``served_cost``: objective
    coefficient per GPU-h served, one value or one per step [S]; ``pen_sla`` per GPU-h dropped or
    behind schedule; ``n_gpus`` the cluster's size (capacity row per step). Returns the served
    columns per step and class ``[S][C]`` and per step ``[S]``.
    """
    n_steps, n_classes, n_buckets = arrivals.shape
    per_step = np.ndim(served_cost) > 0
    # jobs: served (x) and left (r) per class, bucket and step while the bucket is open
    served_cols: list[list[list[np.ndarray]]] = [
        [[] for _ in range(n_classes)] for _ in range(n_steps)
    ]  # [j][c]
    drop_cols, behind_cols = [], []
    for k in range(n_buckets):
        last = n_steps if k == n_buckets - 1 else min(int(bucket_due_step[k]) - t0, n_steps)
        if last <= 0:  # already due: nothing of it can be queued
            continue
        for c in range(n_classes):
            x = model.columns(last, 0.0, np.inf, served_cost[:last] if per_step else served_cost)
            r = model.columns(last, 0.0, np.inf)
            # r[0] + x[0] = arrivals[0];  r[j] - r[j-1] + x[j] = arrivals[j]
            model.rows([(r[:1], 1.0), (x[:1], 1.0)], arrivals[0, c, k], arrivals[0, c, k])
            if last > 1:
                model.rows(
                    [(r[1:], 1.0), (r[:-1], -1.0), (x[1:], 1.0)],
                    arrivals[1:last, c, k],
                    arrivals[1:last, c, k],
                )
            for j in range(last):
                served_cols[j][c].append(x[j : j + 1])
            if k == n_buckets - 1:  # checked against its carry allowance at the day's end
                behind_cols.append((c, r[-1]))
            else:  # falls due within the day: what is left is dropped
                drop_cols.append(r[-1])
    served_by_class = [
        [np.concatenate(g) if g else np.zeros(0, dtype=int) for g in step] for step in served_cols
    ]
    served_groups = [np.concatenate(step) for step in served_by_class]  # x columns of each step

    # work behind schedule at the day's end: behind >= r_last - allowance
    behind = model.columns(len(behind_cols), 0.0, np.inf, pen_sla)
    for i, (c, r_last) in enumerate(behind_cols):
        model.rows(
            [(behind[i : i + 1], 1.0), (np.array([r_last]), -1.0)], -carry_allowance_gpuh[c], np.inf
        )
    model.add_cost(
        np.asarray(drop_cols, dtype=int), pen_sla
    )  # work left when its bucket falls due is dropped

    # GPU capacity per step
    model.rows([], -np.inf, n_gpus * dt_h, served_groups, 1.0)
    return served_by_class, served_groups


def add_cooling_rows(
    model: SparseModel,
    params: DCMicrogridParams,
    cooling: np.ndarray,
    served_groups: list[np.ndarray],
    cop: np.ndarray,
    heat_offset: np.ndarray,
    dt_h: float,
) -> None:
    """Cooling rows of a day plan: the plant's capacity and ``cooling >= (it + offset) / COP``.

    ``cooling`` [S]: the plant-power columns (MW); ``cop`` [S] and ``heat_offset`` [S] (MW) from
    :func:`zone_trajectory`; ``params``: the site (its ``cluster`` and ``cooling``).
    """
    it_base_mw, mw_per_gpuh = it_power_model(params.cluster, dt_h)
    # heat the plant can still take (MW); never negative, so an undersized plant still gets a plan
    q_room = np.maximum(params.cooling.q_max_mw - it_base_mw - heat_offset, 0.0)
    model.rows([], -np.inf, q_room, served_groups, mw_per_gpuh)
    # cooling >= (it + offset) / COP
    model.rows([(cooling, cop)], it_base_mw + heat_offset, np.inf, served_groups, -mw_per_gpuh)


def plan_shares(
    values: np.ndarray, served_by_class: list[list[np.ndarray]], n_gpus: int, dt_h: float
) -> np.ndarray:
    """GPU shares [S, C] (the env's action) of a solved plan: the planned GPUs of each class, plus
    :data:`SHARE_MARGIN` against float32 round-off; ``values``: the solution's column values."""
    gpus = (
        np.array([[values[idx].sum() for idx in step] for step in served_by_class]) / dt_h
    )  # [S, C]
    shares = gpus / n_gpus
    shares = np.where(gpus > 0.0, shares + SHARE_MARGIN, 0.0)
    over = shares.sum(axis=1, keepdims=True)
    return shares / np.maximum(over, 1.0)  # the margin never pushes the total above 1
