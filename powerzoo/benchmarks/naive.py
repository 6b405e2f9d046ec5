"""The naive baseline of every task: what it is (:data:`NAIVE_BASELINES`) and its actions.

The **naive** policy is what an operator does who ignores what makes the task hard
(:class:`~powerzoo.benchmarks.policies.NaivePolicy` acts it; the baselines table and the task
card hold its rows). On the storage and feeder tasks it is the task's idle action, on
``dc_scheduling`` its feeder-blind rule, on ``gencos_bidding`` truthful bidding; this module
computes the others from the physical observations, reading the task's own network data, as the
rule-based baselines do:

* **dispatch tasks** (``marl_opf``, ``opf``, ``opf_118``, ``opf_118_7d``): the network-blind
  equal-incremental-cost economic dispatch of the observed system load
  (:func:`equal_incremental_cost_dispatch`): the cheapest dispatch that meets the total demand
  within every unit's step range (Pmin, Pmax and the ramps from its last output, as the env
  enforces them; on ``opf_118_7d`` the hydro plant's output at most its energy left, spent
  first as it costs nothing), the line ratings ignored;
* **unit commitment** (``marl_uc``, ``tso``): the rule's priority-list commitment for the load
  plus the 10 % reserve margin within the minimum up and down times (no N-1 term on ``tso``, no
  unit added to relieve a line), then the same network-blind dispatch of the committed units
  within their step bounds (ramps, Pmin);
* ``acopf_118``: that dispatch for the load plus the last observed losses, with the case's
  published voltage schedule as it is;
* ``voltage_control_118`` (the active dispatch is given): "no control", the published voltage
  schedule as it is;
* ``joint_trans_dist`` (and ``_7d``, ``_118``): the batteries at 0 MW and the generators at the
  network-blind dispatch of the transmission load plus the feeders' idle head power;
* ``dc_microgrid`` (and ``_safe``): the rule's GPU shares and cooling, the battery at 0 MW and
  the diesel covering what the rule's load estimate leaves above PV and the grid tie's cap.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.physics.lambda_dispatch import equal_incremental_cost_dispatch

__all__ = [
    "NaiveBaseline",
    "NAIVE_BASELINES",
    "naive_baseline",
    "table_baselines",
    "naive_action",
    "equal_incremental_cost_dispatch",
    "naive_dispatch_action",
]


@dataclasses.dataclass(frozen=True)
class NaiveBaseline:
    """What the naive policy of one task does.

    ``kind`` is how it acts: ``"idle"`` (the task's idle action), ``"rule_based"`` (its rule),
    ``"truthful"`` (its truthful bids) or ``"dispatch"`` (computed by
    :func:`powerzoo.benchmarks.naive.naive_dispatch_action`); ``doc`` says it in words.
    """

    kind: str
    doc: str


_IDLE_STORAGE = NaiveBaseline(
    "idle", "idle: the storage stands still (a storage task's naive operator does not trade)"
)
_NETWORK_BLIND = NaiveBaseline(
    "dispatch",
    "network-blind equal-incremental-cost economic dispatch: the cheapest dispatch of the "
    "observed system load within every unit's step range (Pmin, Pmax, ramps), line ratings "
    "ignored",
)
_JOINT = NaiveBaseline(
    "dispatch",
    "batteries at 0 MW; generators at the network-blind equal-incremental-cost dispatch of the "
    "transmission load plus the feeders' idle head power, line ratings ignored",
)
_MICROGRID = NaiveBaseline(
    "dispatch",
    "no storage dispatch (closest to idle, which this task lacks): the rule's GPU shares and "
    "cooling, the battery at 0 MW and the diesel covering what the rule's load estimate leaves "
    "above PV and the grid tie's cap",
)
NAIVE_BASELINES: dict[str, NaiveBaseline] = {
    "battery_arbitrage": _IDLE_STORAGE,
    "marl_der_arbitrage": _IDLE_STORAGE,
    "marl_ders_benchmark": NaiveBaseline(
        "idle", "idle: the DERs left alone (batteries at 0, PV uncurtailed, loads as they come)"
    ),
    "marl_ev_v2g": NaiveBaseline(
        "idle", "idle: uncontrolled charging (every plugged car at full power until full)"
    ),
    "dso": NaiveBaseline("idle", "no control: the idle action, every load served as it comes"),
    "volt_var_123": NaiveBaseline(
        "idle",
        "no control: regulator taps at neutral, capacitors in service, PV at unity power factor",
    ),
    "lv_unbalance": NaiveBaseline(
        "idle",
        "idle: PV at full output and unity power factor, every car charging at full power on "
        "arrival until full",
    ),
    "marl_opf": _NETWORK_BLIND,
    "opf": _NETWORK_BLIND,
    "opf_118": _NETWORK_BLIND,
    "opf_118_7d": _NETWORK_BLIND,
    "marl_uc": NaiveBaseline(
        "dispatch",
        "network-blind unit commitment: the rule's priority-list commitment for the load plus "
        "the 10 % reserve margin, then the equal-incremental-cost dispatch of the committed "
        "units within their step bounds, line ratings ignored",
    ),
    "tso": NaiveBaseline(
        "dispatch",
        "network-blind unit commitment: the rule's priority-list commitment for the load plus "
        "the 10 % reserve margin (no N-1 term), then the equal-incremental-cost dispatch of the "
        "committed units within their step bounds, line ratings ignored",
    ),
    "acopf_118": NaiveBaseline(
        "dispatch",
        "network-blind equal-incremental-cost dispatch of the load plus the last observed "
        "losses, with the case's published voltage schedule as it is",
    ),
    "voltage_control_118": NaiveBaseline(
        "dispatch",
        "no control (the active dispatch is given): the case's published voltage schedule as it "
        "is, no unit moved inside its reactive limits",
    ),
    "joint_trans_dist": _JOINT,
    "joint_trans_dist_7d": _JOINT,
    "joint_trans_dist_118": _JOINT,
    "dc_microgrid": _MICROGRID,
    "dc_microgrid_safe": _MICROGRID,
    "dc_scheduling": NaiveBaseline(
        "rule_based",
        "the data centre's own compute and cooling rule, blind to the feeder (the same as "
        "rule_based: no policy that ignores the jobs serves them; closest to no control)",
    ),
    "gencos_bidding": NaiveBaseline(
        "truthful",
        "truthful bidding (every offer at marginal cost; closest to no strategy, the same as "
        "the truthful baseline)",
    ),
}
"""The naive baseline of each built-in task (:class:`NaivePolicy`): what an operator does who
ignores what makes the task hard. Storage tasks: idle; dispatch tasks: the network-blind
equal-incremental-cost economic dispatch; feeder tasks: no control; the others the closest,
said in ``doc``. A task of your own that lists ``idle`` gets idle (:func:`naive_baseline`)."""


def naive_baseline(task: str, spec: Any = None) -> NaiveBaseline | None:
    """The naive baseline of ``task``: its :data:`NAIVE_BASELINES` entry, else idle for a task
    with an idle action, else ``None``.

    Args:
        task: A task name.
        spec: Its spec (default: the registered task's).

    Returns:
        The naive baseline, or ``None`` where the task has none.
    """
    if task in NAIVE_BASELINES:
        return NAIVE_BASELINES[task]
    if spec is None:
        from powerzoo.tasks import task_spec

        spec = task_spec(task)
    if "idle" in spec.baselines:
        return NaiveBaseline("idle", "idle: the task's no-control action")
    return None


def table_baselines(task: str, spec: Any = None) -> tuple[str, ...]:
    """The baselines the table holds for ``task``: ``spec.baselines`` plus ``"naive"`` where it
    has a naive baseline (:func:`naive_baseline`).

    Args:
        task: A task name.
        spec: Its spec (default: the registered task's).

    Returns:
        Baseline names, in table order.
    """
    if spec is None:
        from powerzoo.tasks import task_spec

        spec = task_spec(task)
    names = tuple(spec.baselines)
    return (*names, "naive") if naive_baseline(task, spec) is not None else names


def _case_dispatch(case: Any, total_mw: np.ndarray, lo: Any = None, hi: Any = None) -> np.ndarray:
    """Network-blind dispatch [B, n_gen] of a transmission case's units for ``total_mw`` [B]."""
    pmin, pmax = case.gen_limits_mw
    return equal_incremental_cost_dispatch(
        total_mw,
        pmin if lo is None else lo,
        pmax if hi is None else hi,
        case.gen_c1_per_mwh,
        case.gen_c2_per_mw2h,
    )


def _economic_dispatch(task: Any, obs: np.ndarray) -> np.ndarray:
    from powerzoo.tasks.economic_dispatch import sced
    from powerzoo.tasks.economic_dispatch.opf import Opf

    load = obs[:, 0, task._system_load_slot].astype(np.float64)
    lo, hi = task.step_range_from_obs(obs)  # Pmin, Pmax, ramps (the others at Pmin on opf)
    p = sced.lambda_dispatch(task.case, load, lo, hi)
    return task.joint_action(p) if isinstance(task, Opf) else p


def _unit_commitment(task: Any, obs: np.ndarray) -> np.ndarray:
    from powerzoo.devices.thermal_unit import priority_list_commitment
    from powerzoo.tasks.unit_commitment.rule import unit_step_limits
    from powerzoo.tasks.unit_commitment.spec import RESERVE_MARGIN

    u = unit_step_limits(task, obs)
    f, on, peak, reach, response = task.fleet, u["on"], u["peak"], u["reach"], u["response"]
    load, p_prev, first, must_on, must_off = (
        u[k] for k in ("load", "p_prev", "first", "must_on", "must_off")
    )
    margin = RESERVE_MARGIN * peak
    want = priority_list_commitment(
        task.priority_order, reach, peak + margin, must_on, must_off, response, margin
    )
    lo, hi = f.dispatch_range(on, p_prev, want, want & ~on, first)
    p = equal_incremental_cost_dispatch(load, lo, hi, f.c1_per_mwh, f.c2_per_mw2h)
    action = np.empty(want.shape + (2,))
    action[:, :, 0] = p
    action[:, :, 1] = want
    return action.reshape(want.shape[0], -1)


def _acopf(task: Any, obs: np.ndarray) -> np.ndarray:
    load = obs[:, 0, task._slots["system_load_mw"]].astype(np.float64)
    losses = obs[:, 0, task._slots["prev_losses_mw"]].astype(np.float64)
    p = _case_dispatch(task.case, load + np.maximum(losses, 0.0))
    return task.joint_action(p, np.broadcast_to(task.grid.vm_set_pu, p.shape))


def _voltage_control(task: Any, obs: np.ndarray) -> np.ndarray:
    vm = np.broadcast_to(task.grid.vm_set_pu, (obs.shape[0], task.n_gen))
    return task.joint_action(vm)


def _joint_trans_dist(task: Any, obs: np.ndarray) -> np.ndarray:
    from powerzoo.tasks.joint_trans_dist.areas import JointTransDist118

    c, row = task._col, obs[:, 0].astype(np.float64)
    total = row[:, c["system"]] + row[:, c["idle"]]
    outputs = np.concatenate(
        [_case_dispatch(task.case, total), np.zeros((obs.shape[0], task.n_bat))], axis=1
    )
    return task.joint_action(outputs) if isinstance(task, JointTransDist118) else outputs


def _dc_microgrid(task: Any, obs: np.ndarray) -> np.ndarray:
    from powerzoo.devices.cooling import cooling_cop
    from powerzoo.devices.gpu_cluster import it_power_mw
    from powerzoo.devices.pv import pv_power_mw
    from powerzoo.tasks.dc_microgrid.rule import RULE_LOAD_MARGIN

    action = np.array(task.rule_based_action(obs), dtype=np.float64)
    fields = dict(zip(task.spec.observation.names, np.asarray(obs, np.float64).T, strict=True))
    p = task.params
    allocated = (action[:, 0] + action[:, 1]) * p.cluster.n_gpus
    it_mw = it_power_mw(p.cluster, allocated, allocated)
    cop = cooling_cop(p.cooling, fields["temp_c"], action[:, 2])
    load_mw = it_mw * (1.0 + 1.0 / cop) * RULE_LOAD_MARGIN
    shortfall = load_mw - pv_power_mw(p.pv, fields["pv_cf"]) - p.grid.import_max_mw
    diesel = p.diesel
    action[:, 3] = 0.0
    action[:, 4] = np.where(
        shortfall > 0.0, np.clip(shortfall, diesel.p_min_mw, diesel.rated_mw), 0.0
    )
    return action


def naive_dispatch_action(task: Any, obs: np.ndarray) -> np.ndarray:
    """The naive policy's physical joint action [B, act_dim] on a task whose naive policy is
    computed here (module docstring), from its default-mode physical observations.

    Args:
        task: The built task (a dispatch, unit-commitment, AC, joint or data-centre microgrid
            task).
        obs: Physical observations, [B, obs_dim] or [B, n_agents, obs_dim].

    Returns:
        The physical joint action [B, act_dim].
    """
    from powerzoo.tasks.acopf import Acopf118
    from powerzoo.tasks.dc_microgrid.task import DCMicrogrid
    from powerzoo.tasks.economic_dispatch.model import EconomicDispatch
    from powerzoo.tasks.joint_trans_dist.task import JointTransDist
    from powerzoo.tasks.unit_commitment.task import UnitCommitment
    from powerzoo.tasks.voltage_control import VoltageControl118

    for cls, act in (
        (EconomicDispatch, _economic_dispatch),
        (UnitCommitment, _unit_commitment),
        (Acopf118, _acopf),
        (VoltageControl118, _voltage_control),
        (JointTransDist, _joint_trans_dist),
        (DCMicrogrid, _dc_microgrid),
    ):
        if isinstance(task, cls):
            return act(task, obs)
    raise ValueError(f"{task.spec.task_id}: no naive dispatch is defined for this task")


def naive_action(task: Any, obs: np.ndarray) -> np.ndarray:
    """The naive policy's physical joint action [B, act_dim] on ``task`` from its default-mode
    physical observations: by its :func:`naive_baseline`'s kind, the idle action, the rule, the
    truthful bids or :func:`naive_dispatch_action`.

    Args:
        task: The built task.
        obs: Physical observations, [B, obs_dim] or [B, n_agents, obs_dim].

    Returns:
        The physical joint action [B, act_dim].
    """
    naive = naive_baseline(task.spec.task_id, task.spec)
    if naive is None:
        raise ValueError(f"{task.spec.task_id} defines no naive baseline")
    if naive.kind == "idle":
        return task.idle_action(obs)
    if naive.kind == "rule_based":
        return task.rule_based_action(obs)
    if naive.kind == "truthful":
        return task.truthful_action(obs)
    return naive_dispatch_action(task, obs)
