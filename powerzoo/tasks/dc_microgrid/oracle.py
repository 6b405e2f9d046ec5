"""Perfect-foresight reference plan of one ``dc_microgrid`` day: a MILP solved by HiGHS (highspy).

Given the state at step ``t0`` and the rest of the day's weather, prices, grid carbon intensity
and job arrivals, :func:`solve_day_plan` chooses, for every remaining step, the GPUs serving each
deadline bucket of each job class, battery charge and discharge, diesel output and grid import,
to maximise the penalised reward of ``dc_microgrid`` (weighted ``[energy, cost, carbon]`` minus
the violation penalties). Model, per step ``j`` (length ``dt`` h):

* Jobs: ``x[c, k, j]`` GPU-h of class ``c`` bucket ``k`` served; queued work per bucket
  ``r[c, k, j] = r[c, k, j-1] + arrivals - x >= 0``; what is left when a bucket falls due is
  dropped (``sla_violation``); at the day's end the last bucket may keep its carry allowance,
  the excess is behind schedule. ``sum x <= n_gpus dt``. The env serves each class
  earliest-deadline-first: given the plan's per-class GPUs it serves the same work per step and
  meets every deadline the plan meets (EDF is optimal for a divisible workload), so only the
  per-class totals become actions.
* IT power: planned GPUs are always busy (an allocated idle GPU draws more than a parked one),
  ``it = n_gpus p_parked + (p_active - p_parked) gpus``.
* Cooling: the setpoint is held at :data:`ORACLE_SETPOINT_C`, just under the 27 deg C limit
  (the highest COP with no overtemperature); a zone that starts warmer is first brought down as
  fast as the setpoint range and the plant's capacity allow. The zone's trajectory is then fixed by
  the plant's
  controller, so the heat to remove is the IT power plus a known offset (envelope gains and the
  zone's own warming), and the cooling power ``max(it + offset, 0) / COP`` is an LP constraint.
* Supply: ``pv + diesel + discharge - charge + import - spill + deficit = it + cooling``;
  SOC bounds with the battery's efficiencies; diesel ``0`` or in ``[p_min, rated]`` (binary
  ``on[j]``: the only integers); import up to the grid cap.

The plan is a reference, not a proof of optimality: the fixed setpoint forgoes pre-cooling, and
the env's plant may clip cooling at zero in cold weather (the realised return is then a little
better than planned). It is the same plan for ``dc_microgrid_safe``: no violation is worth its
penalty, so the CMDP thresholds are met with room to spare.

The model (~18,000 columns, ~10,000 rows for a whole day) is assembled as numpy blocks and passed
to HiGHS with one ``addCols`` and one ``addRows`` call: highspy's expression API builds the same
rows one Python object at a time, about ten times slower than the vectorised build.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from powerzoo.devices.cooling import cooling_cop
from powerzoo.devices.gpu_cluster import GpuClusterParams
from powerzoo.devices.thermal_zone import setpoint_reaching, zone_step
from powerzoo.tasks.datacentre.site import DCMicrogridParams

if TYPE_CHECKING:  # highspy is imported when a plan is solved, not with the task
    import highspy

__all__ = [
    "DayForesight",
    "DayPlan",
    "ORACLE_SETPOINT_C",
    "SparseModel",
    "add_job_service",
    "add_cooling_rows",
    "plan_shares",
    "solve_day_plan",
    "zone_trajectory",
]

ORACLE_SETPOINT_C = 26.9  # deg C: 0.1 K below the ASHRAE A1 limit
SHARE_MARGIN = 5e-7  # fraction of GPUs added to each planned share (float32 actions lose ~6e-8)
# supply planned above the load (MW), for that margin's extra load (~1.5e-6 MW) and float32
# round-off
# (~1e-7 MW): the env imports that much less, or spills it, instead of running a deficit
SUPPLY_MARGIN_MW = 1e-5
MIP_TIME_LIMIT_S = 60.0
MIP_REL_GAP = 1e-5


@dataclasses.dataclass(frozen=True)
class DayForesight:
    """Everything the plan knows, from step ``t0`` to the end of the day (S = horizon - t0 steps).

    ``arrivals_gpuh[j, c, k]``: work of class ``c`` due by the end of bucket ``k`` that is queued
    when step ``t0 + j`` is served; row 0 is the current queue, later rows are new arrivals.
    """

    t0: int
    soc: float  # battery SOC now (fraction)
    zone_temp_c: float  # server-zone temperature now (deg C)
    temp_out_c: np.ndarray  # [S] outdoor temperature (deg C)
    price_per_mwh: np.ndarray  # [S] grid import price ($/MWh)
    grid_co2_t_per_mwh: np.ndarray  # [S] grid carbon intensity (tCO2/MWh)
    pv_mw: np.ndarray  # [S] available PV power (MW)
    arrivals_gpuh: np.ndarray  # [S, C, K] work per bucket (GPU-h), see above
    carry_allowance_gpuh: np.ndarray  # [C] last-bucket work that may be left at the day's end
    bucket_due_step: np.ndarray  # [K] episode step at which each bucket's leftover is dropped


@dataclasses.dataclass(frozen=True)
class DayPlan:
    """Physical actions [S, 5] (the env's action layout) and the MILP's forecast of the reward."""

    actions: np.ndarray
    predicted_return: float  # sum of the penalised reward over the remaining steps
    predicted_zone_temp_c: np.ndarray  # [S] zone temperature after each step (deg C)
    status: str  # HiGHS's model status: optimal, or a time limit with a feasible solution


class SparseModel:
    """A (MI)LP ``min cost x`` s.t. ``lower <= A x <= upper``, ``low <= x <= high``, built from
    numpy blocks."""

    def __init__(self) -> None:
        self.n_cols = 0
        self.col_low: list[np.ndarray] = []
        self.col_high: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n_rows = 0
        self.row_ids: list[np.ndarray] = []
        self.col_ids: list[np.ndarray] = []
        self.coefs: list[np.ndarray] = []
        self.row_low: list[np.ndarray] = []
        self.row_high: list[np.ndarray] = []
        self.extra_cost: list[tuple[np.ndarray, float]] = []

    def columns(
        self,
        n: int,
        low: float,
        high: float | np.ndarray,
        cost: float | np.ndarray = 0.0,
        integer: bool = False,
    ) -> np.ndarray:
        """Indices of ``n`` new columns with bounds ``[low, high]`` and objective coefficients
        ``cost``."""
        idx = np.arange(self.n_cols, self.n_cols + n)
        self.n_cols += n
        self.col_low.append(np.full(n, low, dtype=float))
        self.col_high.append(np.broadcast_to(np.asarray(high, dtype=float), (n,)).copy())
        self.cost.append(np.broadcast_to(np.asarray(cost, dtype=float), (n,)).copy())
        self.integer.append(np.full(n, int(integer)))
        return idx

    def add_cost(self, cols: np.ndarray, value: float) -> None:
        """Add ``value`` to the objective coefficients of ``cols`` (distinct columns)."""
        self.extra_cost.append((np.asarray(cols, dtype=int), value))

    def rows(
        self,
        terms: list[tuple[np.ndarray, float | np.ndarray]],
        low: float | np.ndarray,
        high: float | np.ndarray,
        groups: list[np.ndarray] | None = None,
        group_coef: float = 0.0,
    ) -> None:
        """Rows ``low <= sum coef * x[cols] (+ group_coef * sum x[groups[i]]) <= high``.

        Each term's ``cols`` holds one column per row; ``groups`` (optional) a ragged list of
        column arrays, one per row, all with the coefficient ``group_coef``.
        """
        n = len(groups) if groups is not None else len(terms[0][0])
        row_ids = np.arange(self.n_rows, self.n_rows + n)
        for cols, coef in terms:
            self._triplets(
                row_ids, np.asarray(cols), np.broadcast_to(np.asarray(coef, dtype=float), (n,))
            )
        for i, group in enumerate(groups or ()):
            self._triplets(
                np.full(len(group), self.n_rows + i),
                np.asarray(group),
                np.full(len(group), group_coef),
            )
        self.row_low.append(np.broadcast_to(np.asarray(low, dtype=float), (n,)))
        self.row_high.append(np.broadcast_to(np.asarray(high, dtype=float), (n,)))
        self.n_rows += n

    def _triplets(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        self.row_ids.append(rows)
        self.col_ids.append(cols)
        self.coefs.append(vals)

    def to_highs(self) -> highspy.Highs:
        """The model in a quiet :class:`highspy.Highs` (columns, then rows in compressed-row
        form)."""
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        cost = np.concatenate(self.cost)
        for cols, value in self.extra_cost:
            cost[cols] += value
        h.addCols(
            self.n_cols,
            cost,
            np.concatenate(self.col_low),
            np.concatenate(self.col_high),
            0,
            np.empty(0, np.int32),
            np.empty(0, np.int32),
            np.empty(0),
        )
        integer = np.flatnonzero(np.concatenate(self.integer)).astype(np.int32)
        h.changeColsIntegrality(
            integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger)
        )
        rows, cols = np.concatenate(self.row_ids), np.concatenate(self.col_ids)
        order = np.lexsort((cols, rows))  # row-major, columns ascending within a row
        starts = np.searchsorted(rows[order], np.arange(self.n_rows))
        h.addRows(
            self.n_rows,
            np.concatenate(self.row_low),
            np.concatenate(self.row_high),
            order.size,
            starts.astype(np.int32),
            cols[order].astype(np.int32),
            np.concatenate(self.coefs)[order],
        )
        return h


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

    ``arrivals`` [S, C, K] (GPU-h, :attr:`DayForesight.arrivals_gpuh`); ``bucket_due_step`` [K];
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


def solve_day_plan(
    params: DCMicrogridParams,
    foresight: DayForesight,
    dt_h: float,
    weights: np.ndarray,
    penalties: np.ndarray,
    setpoint_min_c: float,
    setpoint_c: float = ORACLE_SETPOINT_C,
) -> DayPlan:
    """Best plan of the rest of the day under perfect foresight (see the module docstring).

    ``weights`` are the reward weights of ``[energy, cost, carbon]``; ``penalties`` those of
    ``[sla_violation (per GPU-h), overtemperature (per K h), power_deficit (per MWh)]``;
    ``setpoint_min_c`` the lowest setpoint (deg C), used only to cool a zone that starts above
    ``setpoint_c``; ``dt_h`` the step length (h). Raises ``RuntimeError`` when HiGHS finds no
    feasible plan.
    """
    cl, bat, dsl, grid = params.cluster, params.battery, params.diesel, params.grid
    w_energy, w_cost, w_carbon = (float(v) for v in weights)
    pen_sla, pen_temp, pen_deficit = (float(v) for v in penalties)
    arrivals = np.asarray(foresight.arrivals_gpuh, dtype=float)
    n_steps = arrivals.shape[0]
    t0 = foresight.t0
    price, co2 = foresight.price_per_mwh, foresight.grid_co2_t_per_mwh

    setpoint, zone_temp, heat_offset = zone_trajectory(
        params, foresight.zone_temp_c, foresight.temp_out_c, setpoint_c, setpoint_min_c, dt_h
    )
    cop = cooling_cop(params.cooling, foresight.temp_out_c, setpoint)
    it_base_mw, mw_per_gpuh = it_power_model(cl, dt_h)

    model = SparseModel()
    # supply side, one column per step
    energy_cost = w_energy * dt_h  # per MWh of facility energy
    charge = model.columns(
        n_steps, 0.0, bat.power_max_mw, w_cost * bat.degradation_cost_per_mwh * dt_h
    )
    discharge = model.columns(
        n_steps, 0.0, bat.power_max_mw, w_cost * bat.degradation_cost_per_mwh * dt_h
    )
    stored = model.columns(
        n_steps, bat.soc_min * bat.energy_capacity_mwh, bat.soc_max * bat.energy_capacity_mwh
    )
    diesel = model.columns(
        n_steps,
        0.0,
        dsl.rated_mw,
        (w_cost * dsl.fuel_cost_per_mwh + w_carbon * dsl.co2_t_per_mwh) * dt_h,
    )
    diesel_on = model.columns(n_steps, 0.0, 1.0, integer=True)
    grid_import = model.columns(
        n_steps, 0.0, grid.import_max_mw, (w_cost * price + w_carbon * co2) * dt_h
    )
    spill = model.columns(n_steps, 0.0, np.inf)
    deficit = model.columns(n_steps, 0.0, np.inf, pen_deficit * dt_h)
    cooling = model.columns(n_steps, 0.0, np.inf, energy_cost)

    served_by_class, served_groups = add_job_service(
        model,
        arrivals,
        foresight.bucket_due_step,
        t0,
        foresight.carry_allowance_gpuh,
        energy_cost * mw_per_gpuh,
        pen_sla,
        cl.n_gpus,
        dt_h,
    )
    add_cooling_rows(model, params, cooling, served_groups, cop, heat_offset, dt_h)
    # power balance: diesel + discharge - charge + import - spill + deficit - cooling - it_var =
    # it_base - pv
    balance = [
        (diesel, 1.0),
        (discharge, 1.0),
        (charge, -1.0),
        (grid_import, 1.0),
        (spill, -1.0),
        (deficit, 1.0),
        (cooling, -1.0),
    ]
    rhs = it_base_mw + SUPPLY_MARGIN_MW - foresight.pv_mw
    model.rows(balance, rhs, rhs, served_groups, -mw_per_gpuh)
    # battery energy: e[j] - e[j-1] - eta_c dt ch + dt / eta_d dis = 0 (e[-1] = soc0 * capacity)
    e0 = foresight.soc * bat.energy_capacity_mwh
    storage = [
        (charge, -bat.charge_efficiency * dt_h),
        (discharge, dt_h / bat.discharge_efficiency),
    ]
    model.rows([(stored[:1], 1.0)] + [(c[:1], v) for c, v in storage], e0, e0)
    if n_steps > 1:
        model.rows(
            [(stored[1:], 1.0), (stored[:-1], -1.0)] + [(c[1:], v) for c, v in storage], 0.0, 0.0
        )
    # diesel: p_min on <= diesel <= rated on
    model.rows([(diesel, 1.0), (diesel_on, -dsl.p_min_mw)], 0.0, np.inf)
    model.rows([(diesel, 1.0), (diesel_on, -dsl.rated_mw)], -np.inf, 0.0)

    highs = model.to_highs()
    highs.setOptionValue("time_limit", MIP_TIME_LIMIT_S)
    highs.setOptionValue("mip_rel_gap", MIP_REL_GAP)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    solution = highs.getSolution()
    if not solution.value_valid:
        raise RuntimeError(f"dc_microgrid oracle: HiGHS found no plan from step {t0} ({status})")
    v = np.asarray(solution.col_value)

    actions = np.empty((n_steps, 5))
    actions[:, :2] = plan_shares(v, served_by_class, cl.n_gpus, dt_h)
    actions[:, 2] = setpoint
    actions[:, 3] = v[discharge] - v[charge]
    actions[:, 4] = np.where(v[diesel_on] > 0.5, np.maximum(v[diesel], dsl.p_min_mw), 0.0)

    overtemp_kh = np.maximum(zone_temp - params.zone.temp_max_c, 0.0).sum() * dt_h
    it_energy = it_base_mw * dt_h * n_steps * w_energy
    objective = highs.getInfo().objective_function_value
    predicted = -(float(objective) + it_energy + pen_temp * overtemp_kh)
    return DayPlan(
        actions=actions, predicted_return=predicted, predicted_zone_temp_c=zone_temp, status=status
    )
