"""The ``lv_unbalance`` spec: parameters, agents (groups of homes), the action layout and the
observation fields. The model is described in :mod:`powerzoo.tasks.lv_unbalance`."""

from __future__ import annotations

import dataclasses

import numpy as np

from powerzoo.data import calendar
from powerzoo.devices.ev_fleet import EVFleetParams
from powerzoo.tasks.lv_unbalance.homes import HORIZON, STEP_MINUTES, Homes
from powerzoo.tasks.spec import ActionEntry, TaskSpec, cmdp_fields, mode_spec_fields, padded_action

__all__ = [
    "N_HOMES",
    "N_GROUPS",
    "HOMES_PER_GROUP",
    "HOME_FIELDS",
    "COST_ROWS",
    "LvUnbalanceParams",
    "action_layout",
    "lv_unbalance_spec",
]

N_HOMES = 55
N_GROUPS = 5
HOMES_PER_GROUP = N_HOMES // N_GROUPS  # 11 homes per agent, consecutive along the feeder
AGENTS = tuple(f"group_{g}" for g in range(N_GROUPS))

# (name, unit, per-episode budget, penalty $ per unit in the "penalized" preset)
COST_ROWS = (
    ("voltage_violation", "p.u. outside [0.9, 1.1] (sum over customers, per step)", 0.1, 200.0),
    ("voltage_unbalance", "% VUF above 2 % (sum over customer buses, per step)", 0.5, 20.0),
    ("thermal_overload", "MVAh (sum over cables, transformer and phases)", 0.5, 50.0),
)

_TIME = (
    ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
    ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
    ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
    ("tariff_per_kwh", "$/kWh", 0.0, 1.0, 0.0, 0.4),
)
_FEEDER = (
    ("v_min_pu", "p.u.", 0.0, 1.5, 0.9, 1.1),
    ("v_max_pu", "p.u.", 0.0, 1.5, 0.9, 1.1),
    ("vuf_max_pct", "%", 0.0, 100.0, 0.0, 2.0),
    ("loading_max", "p.u. of rating", 0.0, 10.0, 0.0, 1.5),
)
HOME_FIELDS = (  # per home of the group, in this order (zeros where a home lacks the device)
    ("load_kw", "kW", 0.0, 50.0, 0.0, 2.0),
    ("pv_available_kw", "kW", 0.0, 20.0, 0.0, 6.5),
    ("v_pu", "p.u.", 0.0, 1.5, 0.9, 1.1),
    ("ev_plugged", "0/1", 0.0, 1.0, 0.0, 1.0),
    ("ev_need_kwh", "kWh", 0.0, 100.0, 0.0, 40.0),
    ("ev_hours_left", "h", 0.0, 24.0, 0.0, 24.0),
)


@dataclasses.dataclass(frozen=True)
class LvUnbalanceParams:
    """The numbers of an ``lv_unbalance`` episode; each is a task keyword."""

    pv_share: float = 0.6  # share of the 55 homes with rooftop PV
    ev_share: float = 0.4  # share with a home charger
    # share of the PV systems and of the chargers on phases A, B, C (adoption clusters by phase)
    phase_shares: tuple[float, float, float] = (0.6, 0.25, 0.15)
    pv_kw_low: float = 3.5  # PV AC ratings are drawn uniform in [low, high] kW
    pv_kw_high: float = 6.5
    charger_kw: float = 7.4  # single-phase 32 A at 230 V
    start_soc_low: float = 0.3  # state of charge a car left home with: uniform in [low, high]
    start_soc_high: float = 0.7
    oracle_margin_pu: float = 0.004  # the oracle plans voltages this far inside the band

    def __post_init__(self) -> None:
        for name in ("pv_share", "ev_share"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0 or round(value * N_HOMES) < 1:
                raise ValueError(f"lv_unbalance: {name} must give at least one home, got {value}")
        shares = tuple(float(x) for x in self.phase_shares)
        if len(shares) != 3 or min(shares) < 0.0 or abs(sum(shares) - 1.0) > 1e-9:
            raise ValueError(
                "lv_unbalance: phase_shares must be three non-negative shares summing to 1, "
                f"got {self.phase_shares}"
            )
        object.__setattr__(self, "phase_shares", shares)
        if not 0.0 < self.pv_kw_low <= self.pv_kw_high <= 20.0:
            raise ValueError("lv_unbalance: need 0 < pv_kw_low <= pv_kw_high <= 20")
        if not 0.0 < self.charger_kw <= 22.0:
            raise ValueError(f"lv_unbalance: charger_kw must lie in (0, 22], got {self.charger_kw}")
        if not 0.0 <= self.start_soc_low <= self.start_soc_high <= 0.9:
            raise ValueError("lv_unbalance: need 0 <= start_soc_low <= start_soc_high <= 0.9")
        if not 0.0 <= self.oracle_margin_pu < 0.05:
            raise ValueError("lv_unbalance: oracle_margin_pu must lie in [0, 0.05)")

    @property
    def fleet(self) -> EVFleetParams:
        """The cars: 60 kWh, charging only (no V2G), target 80 % state of charge."""
        return EVFleetParams(charge_max_kw=self.charger_kw, discharge_max_kw=0.0)


def _group_of(home: int) -> int:
    return home // HOMES_PER_GROUP


def action_layout(homes: Homes, charger_kw: float) -> tuple[dict[str, list[ActionEntry]], int]:
    """Each agent's action entries (its PV homes' ``pv_limit`` and ``q_kvar``, then its chargers'
    ``ev_kw``) and the entries per agent after padding."""
    entries: dict[str, list[ActionEntry]] = {a: [] for a in AGENTS}
    for j, home in enumerate(homes.pv_homes):
        agent = AGENTS[_group_of(int(home))]
        q = float(homes.q_max_kvar[j])
        entries[agent].append((f"home_{home:02d}.pv_limit", "p.u. of PV rating", 0.0, 1.0))
        entries[agent].append((f"home_{home:02d}.q_kvar", "kvar (+ inject)", -q, q))
    for home in homes.ev_homes:
        agent = AGENTS[_group_of(int(home))]
        entries[agent].append((f"home_{home:02d}.ev_kw", "kW (charging)", 0.0, charger_kw))
    return entries, max(len(e) for e in entries.values())


def lv_unbalance_spec(task_id: str, params: LvUnbalanceParams, homes: Homes) -> TaskSpec:
    """The task's spec for ``params`` and the homes they give."""
    entries, slots = action_layout(homes, params.charger_kw)
    action = padded_action(entries, slots)
    idle = np.zeros(action.dim)
    for k, name in enumerate(action.names):
        if name.endswith(".pv_limit"):
            idle[k] = 1.0
        elif name.endswith(".ev_kw"):
            idle[k] = params.charger_kw
    home_rows = tuple(
        (f"home{s}_{name}", *rest) for s in range(HOMES_PER_GROUP) for name, *rest in HOME_FIELDS
    )
    return TaskSpec(
        task_id=task_id,
        description=(
            f"The IEEE European LV feeder's {N_HOMES} single-phase homes with rooftop PV "
            f"({homes.n_pv}) and home chargers ({homes.n_ev}) on their own phases, clustered "
            "by phase, exact three-phase flow: five agents (groups of 11 homes) curtail PV, set "
            "inverter reactive power and schedule charging at a time-of-use tariff, under "
            "EN 50160's voltage band, the 2 % unbalance limit and the cable and transformer "
            "ratings."
        ),
        agents=AGENTS,
        action=action,
        horizon=HORIZON,
        step_minutes=STEP_MINUTES,
        splits=calendar.BASE_SPLITS + ("load_stress", "heatwave"),
        reward_terms=("import_payment", "export_revenue", "unmet_charging"),
        reward_doc=(
            "team, $ per step: minus every home's import at the time-of-use tariff, plus its "
            "export at 0.05 $/kWh (each home metered on its own), minus 0.60 $/kWh for the "
            "energy a car lacks of its goal when it leaves (the episode's end counts as a "
            "departure)"
        ),
        **cmdp_fields(COST_ROWS, objective="bill"),
        baselines=("random", "rule_based", "oracle", "idle"),
        idle_action=tuple(float(x) for x in idle),
        idle_doc=(
            "no control: every PV inverter at its full output and unity power factor, every "
            "car charged at the charger's full power from the moment it is plugged in until "
            "it is full"
        ),
        **mode_spec_fields({"local": _TIME + _FEEDER + home_rows}, "local"),
    )
