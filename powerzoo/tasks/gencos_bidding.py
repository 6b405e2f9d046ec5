"""``gencos_bidding``: five generation companies bid into the PJM 5-bus market (competitive,
multi-agent).

Model (30-minute steps, 48 per episode = one calendar day)
---------------------------------------------------------
* Network: case5 (PJM 5-bus) with its published ratings (400 MW on 1-2, 240 MW on 4-5) and a
  200 MW wind farm at bus 3 (0-based 2) that is taken at zero price (a negative load).
* Load: bus demand = the calendar load shape ``demand_pu`` x ``load_scale`` (1.1, as
  ``marl_opf``: the case's 1,000 MW at 91 % of the annual peak) x the case's bus shares
  (300 / 300 / 400 MW at buses 2 / 3 / 4); wind = ``wind_cf`` x 200 MW.
* Agents ``genco_0..4``: one company per case5 generator (Alta 40 MW at 14 $/MWh and Park City
  170 MW at 15 $/MWh on bus 1, Solitude 520 MW at 30 $/MWh on bus 3, Sundance 200 MW at
  40 $/MWh on bus 4, Brighton 600 MW at 10 $/MWh on bus 5).
* Action per agent: ``N_BLOCKS = 3`` markups in ``[0, MARKUP_MAX = 1]``: the company's range is
  cut into 3 equal blocks and block ``k`` is offered at ``(1 + m_k) x`` its true marginal cost
  (:mod:`powerzoo.physics.market_clearing`), so markup 0 is truthful and 1 doubles the price.
  A high markup on the last block withholds capacity; one on every block raises the price.
  Offer curves are non-decreasing, as ISO offer rules require: the three markups are read as
  three equal (price, quantity) pairs stacked in order of price, so the blocks are offered at
  the sorted markups (:meth:`~powerzoo.physics.market_clearing.MarketClearing.monotone_markup`;
  on case5's linear costs this clears exactly as the unsorted offer would).
  ``info["action_applied"]`` and the published markups of the observation are the offered
  (sorted) ones.
* Market: every step the offers are cleared by a DC-OPF with the line limits
  (:class:`~powerzoo.physics.market_clearing.MarketClearing`, one stacked HiGHS LP per batch):
  dispatch and locational marginal prices (LMPs). Limits are soft at 1,000 $/MWh of overload and
  unserved load is priced at 10,000 $/MWh, so the market always clears; neither happens on case5
  under any markups in the action range (the offers stay below 80 $/MWh).
* Reward, **per agent** (``shared_reward=False``, competitive): the company's profit in $ per
  step, ``(LMP at its bus x dispatch - production cost) x 0.5 h`` with the true cost
  ``c0 + c1 p + c2 p^2``. ``info["agent_profit"]`` holds the [5] split; ``reward_terms`` the
  team sums ``[energy_revenue, production_cost]`` (negative cost).
* Cost: ``thermal_overload`` (MVAh: overload energy above the ratings summed over branches,
  ``sum_k max(|S_k| - S_rated_k, 0) x dt``, with ``|S| = |P|`` under DC power flow so MVAh = MWh,
  as on every task). Reported, not selected: the clearing respects the limits whenever it can, so
  the cost cannot occur and the task has no CMDP budget.
* Market power in ``info``: ``mean_lmp_per_mwh`` (load-weighted), ``lerner_index``
  ``= sum_g p_g (LMP_g - mc_g) / sum_g p_g LMP_g`` and ``price_cost_ratio``
  ``= sum_g p_g LMP_g / sum_g p_g mc_g`` over the dispatched units (``mc_g`` the true marginal cost
  at the dispatch point). Under truthful bidding both still show the inframarginal rents that
  congestion and the merit order give; markups raise them.
* Observation modes: ``global`` (default: time, system load and wind of the step being cleared,
  the last load-weighted LMP, the own block (limits, marginal cost, last dispatch, last LMP at
  its bus) and every company's last markups as offered (non-decreasing over the blocks):
  offers are published after clearing), ``local`` (time, load, wind, own block and own last
  markups).
* Splits: train / val / test by date; stress splits (test days) ``demand_shift`` (demand x 1.10
  and a tenth of it moved from bus 2 to bus 4, beyond the congested line 4-5: bus shares
  200 / 300 / 500 MW), ``renewable_shock`` (the wind farm trips for 4 hours every day, starting
  at a half-hour between 12:00 and 17:30 drawn per day from a fixed seed), ``load_stress`` and
  ``low_renewable`` (the data layer's scenarios).
* Baselines: ``random`` (uniform markups); ``rule_based`` = myopic best response: every step each
  company picks, from ``BR_GRID`` (markups 0, 0.1, ..., 1 on all its blocks), the markup that
  maximises its own profit of this step against the other companies' last offers (published)
  and the step's load, by clearing the market for each candidate; ``truthful`` (markup 0, the
  competitive benchmark whose dispatch is the DC-OPF of the true costs). There is no oracle: a
  competitive game has no single optimum, and the maximum of the team return (the table's
  number) is collusion, not a target. Numbers in ``baselines.json`` and the README.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powerzoo.data import calendar
from powerzoo.physics.cases import load_case
from powerzoo.physics.market_clearing import MarketClearing
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import TaskSpec, VectorSpec

__all__ = ["GencosBidding", "GencosBiddingParams", "BiddingState", "N_BLOCKS", "MARKUP_MAX"]

CASE = "case5"
HORIZON = 48
STEP_MINUTES = 30
N_BLOCKS = 3
MARKUP_MAX = 1.0
WIND_BUS, WIND_MW = 2, 200.0  # the wind farm's bus (0-based) and the wind_mw observation bound
BR_GRID = np.linspace(0.0, MARKUP_MAX, 11)
# stress splits of this task (test days, base profiles, transformed here)
DEMAND_SHIFT_SHARES = np.array([0.0, 200.0, 300.0, 500.0, 0.0]) / 1000.0
SHOCK_STEPS, SHOCK_FIRST, SHOCK_LAST, SHOCK_SEED = 8, 24, 35, 20230616
TASK_STRESS_SPLITS = ("demand_shift", "renewable_shock")
PRICE_LIMIT = 1e5  # $/MWh, space bound of the LMP fields (soft-limit and VOLL prices included)
_N = 5
AGENTS = tuple(f"genco_{i}" for i in range(_N))

_TIME = (
    ("hour_sin", "-", -1.0, 1.0, -1.0, 1.0),
    ("hour_cos", "-", -1.0, 1.0, -1.0, 1.0),
    ("time_remaining", "fraction of horizon", 0.0, 1.0, 0.0, 1.0),
)
_MARKET = (
    ("system_load_mw", "MW", 0.0, 1e4, 0.0, 1300.0),
    ("wind_mw", "MW", 0.0, WIND_MW, 0.0, WIND_MW),
)
_LAST_PRICE = (("prev_mean_lmp_per_mwh", "$/MWh", -PRICE_LIMIT, PRICE_LIMIT, 0.0, 80.0),)
_OWN = (
    ("own_pmax_mw", "MW", 0.0, 600.0, 0.0, 600.0),
    ("own_marginal_cost_per_mwh", "$/MWh", 0.0, 100.0, 0.0, 40.0),
    ("own_prev_p_mw", "MW", 0.0, 600.0, 0.0, 600.0),
    ("own_prev_lmp_per_mwh", "$/MWh", -PRICE_LIMIT, PRICE_LIMIT, 0.0, 80.0),
)
_OWN_MARKUPS = tuple(
    (f"own_prev_markup_b{k}", "fraction", 0.0, MARKUP_MAX, 0.0, MARKUP_MAX) for k in range(N_BLOCKS)
)
_ALL_MARKUPS = tuple(
    (f"prev_markup_{a}_b{k}", "fraction", 0.0, MARKUP_MAX, 0.0, MARKUP_MAX)
    for a in AGENTS
    for k in range(N_BLOCKS)
)
_MODES = {
    "global": _TIME + _MARKET + _LAST_PRICE + _OWN + _ALL_MARKUPS,
    "local": _TIME + _MARKET + _OWN + _OWN_MARKUPS,
}


@dataclasses.dataclass(frozen=True)
class _Slots:
    """Where the fields of one observation mode sit (``None``: not in the mode)."""

    width: int
    time: slice  # hour_sin, hour_cos, time_remaining
    market: slice  # system_load_mw, wind_mw
    own: slice  # own_pmax_mw, own_marginal_cost_per_mwh
    own_prev_p: int
    own_prev_lmp: int
    mean_lmp: int | None
    own_markups: slice | None
    all_markups: slice | None

    @classmethod
    def of(cls, spec: VectorSpec) -> _Slots:
        return cls(
            width=spec.dim,
            time=spec.slot("hour_sin", "hour_cos", "time_remaining"),
            market=spec.slot("system_load_mw", "wind_mw"),
            own=spec.slot("own_pmax_mw", "own_marginal_cost_per_mwh"),
            own_prev_p=spec.slot("own_prev_p_mw"),
            own_prev_lmp=spec.slot("own_prev_lmp_per_mwh"),
            mean_lmp=spec.optional_slot("prev_mean_lmp_per_mwh"),
            own_markups=spec.optional_slot(*(f[0] for f in _OWN_MARKUPS)),
            all_markups=spec.optional_slot(*(f[0] for f in _ALL_MARKUPS)),
        )


@dataclasses.dataclass
class BiddingState:
    """Batched state; every field has leading axis ``B``."""

    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    prev_markup: np.ndarray  # [B, 5, N_BLOCKS] last cleared offers' markups
    prev_p_mw: np.ndarray  # [B, 5] last dispatch
    prev_lmp_gen: np.ndarray  # [B, 5] last LMP at each company's bus
    prev_mean_lmp: np.ndarray  # [B] last load-weighted LMP


@dataclasses.dataclass(frozen=True)
class GencosBiddingParams:
    """The numbers of a ``gencos_bidding`` episode; each is a task keyword."""

    # system load = the case's published load x this x demand_pu (as in marl_opf)
    load_scale: float = 1.1
    # wind farm capacity (MW) at WIND_BUS: the wind_cf profile times this, offered at no cost
    wind_mw: float = WIND_MW
    # $/MWh of flow above a rating in the market clearing (soft line limits)
    line_penalty_per_mwh: float = 1000.0
    # demand_shift split: the system load x this (and the load moved to other buses)
    demand_shift_level: float = 1.10


class GencosBidding(Task):
    """Five generation companies compete by marking up their offer curves on
    case5.

    ## Description
    Five generation companies, one per generator of the PJM 5-bus case (case5, published ratings),
    bid into a market cleared every half-hour by a DC-OPF with the line limits, which gives the
    dispatch and the locational marginal prices (LMPs). A 200 MW wind farm at bus 3 is taken at zero
    price; the load is the calendar load shape x 1.1 x the case's bus shares. Competitive: each
    company is paid its own profit.

    ## Action
    Per agent, 3 markups in [0, 1]: the company's range is cut into 3 equal blocks and block ``k``
    is offered at ``(1 + m_k) x`` its true marginal cost (markup 0 is truthful). The markups are
    offered sorted, so every offer curve is non-decreasing as ISO offer rules require.

    ## Observation
    Mode ``global`` (default): time, system load and wind of the step being cleared, the last
    load-weighted LMP, the own block (limits, marginal cost, last dispatch, last LMP at its bus)
    and every company's last markups as offered; ``local``: time, load, wind, own block and own
    markups.

    ## Reward
    Per agent, $ per step: ``(LMP at its bus x dispatch - production cost) x 0.5 h`` with the true
    cost ``c0 + c1 p + c2 p^2``. ``info["agent_profit"]`` holds the split; ``info`` also carries
    ``mean_lmp_per_mwh``, ``lerner_index`` and ``price_cost_ratio``.

    ## Costs
    ``thermal_overload`` (MVAh above the ratings), reported only: the clearing respects the limits
    whenever it can, so the task has no CMDP budget.

    ## Starting state
    No previous offers (markups 0) at 00:00 of the split day.

    ## Episode end
    Truncated after 48 steps (one day); no early termination.

    ## Arguments
    ``load_scale`` (1.1), ``wind_mw`` (200), ``line_penalty_per_mwh`` (soft line limits of the
    clearing), ``demand_shift_level`` (the ``demand_shift`` split's load factor).

    ## Baselines
    Random markups; rule-based = myopic best response on a markup grid against the others' last
    offers; truthful (markup 0, the DC-OPF of the true costs). There is no oracle: the maximum of
    the team return is collusion, not a target.
    """

    task_id = "gencos_bidding"

    Params = GencosBiddingParams

    def __init__(self, split: str = "train", **task_kwargs: Any) -> None:
        self.params = p = self.make_params(**task_kwargs)
        spec = self.make_spec(**task_kwargs)
        calendar.check_split(split, spec.splits)
        # the task's own stress splits start on the test days and read the base profiles
        super().__init__(spec, "test" if split in TASK_STRESS_SPLITS else split)
        self.split = split
        self.case = case = load_case(CASE)
        self.market = MarketClearing(case, N_BLOCKS, line_penalty_per_mwh=p.line_penalty_per_mwh)
        spd = self.profiles.steps_per_day
        shares = case.bus_pd_mw / case.total_load_mw
        level = case.total_load_mw * p.load_scale
        if split == "demand_shift":
            shares, level = DEMAND_SHIFT_SHARES, level * p.demand_shift_level
        self.bus_shares = shares
        wind = self.profiles.series["wind_cf"] * p.wind_mw
        if split == "renewable_shock":
            wind = wind * _shock_mask(spd, wind.size)
        self._exogenous = np.stack(
            [self.profiles.series["demand_pu"] * level, wind], axis=1
        )  # [steps, 2] MW
        self._day_start = self.split_days * spd
        steps = np.arange(HORIZON + 1)
        phase = 2.0 * np.pi * (steps % spd) / spd
        self._time = np.stack([np.sin(phase), np.cos(phase), 1.0 - steps / HORIZON], axis=1).astype(
            np.float32
        )
        self._gen_bus = case.gen_bus
        mc = self.market.block_marginal_cost
        self._own = np.stack([case.gen_pmax_mw, mc.mean(axis=1)], axis=1).astype(
            np.float32
        )  # [5, 2]
        self.build_obs_slots(_Slots.of)
        self._c1, self._c2, self._c0 = case.gen_c1_per_mwh, case.gen_c2_per_mw2h, case.gen_c0_per_h
        rate = case.branch_rate_a_mw
        self._rating = np.where(np.isfinite(rate), rate, np.inf)
        glob = self.spec.observation
        self._rule_load = glob.slot("system_load_mw", "wind_mw")
        self._rule_markups = glob.slot(*(f[0] for f in _ALL_MARKUPS))

    # ---- spec -------------------------------------------------------------------------------
    @classmethod
    def spec_for(cls, params: GencosBiddingParams) -> TaskSpec:
        modes = {mode: VectorSpec.from_rows(fields) for mode, fields in _MODES.items()}
        return TaskSpec(
            task_id=cls.task_id,
            description=(
                "Five generation companies bid markups on their offer curves into the PJM 5-bus "
                "market, cleared "
                "every half-hour by a DC-OPF with line limits; each is paid its own profit at "
                "its LMP."
            ),
            agents=AGENTS,
            observation=modes["global"],
            action=VectorSpec(
                names=tuple(f"{a}.markup_b{k}" for a in AGENTS for k in range(N_BLOCKS)),
                units=("fraction of marginal cost",) * (_N * N_BLOCKS),
                low=(0.0,) * (_N * N_BLOCKS),
                high=(MARKUP_MAX,) * (_N * N_BLOCKS),
            ),
            horizon=HORIZON,
            step_minutes=STEP_MINUTES,
            splits=calendar.BASE_SPLITS + TASK_STRESS_SPLITS + ("load_stress", "low_renewable"),
            reward_terms=("energy_revenue", "production_cost"),
            reward_doc=(
                "per agent: own profit (LMP at its bus x dispatch - true production cost) x 0.5 "
                "h in $ per step; "
                "reward_terms are the team sums"
            ),
            constraint_names=("thermal_overload",),
            constraint_units=("MVAh (sum over branches)",),
            # reported, not constrained: market clearing keeps every line within its rating, so
            # the overload cannot occur and a budget on it would constrain nothing
            selected_constraints=(),
            cost_thresholds={},
            baselines=("random", "rule_based", "truthful"),
            reward_presets={"profit": {}},
            obs_modes=tuple(_MODES),
            obs_mode_specs=modes,
            default_obs_mode="global",
            shared_reward=False,
        )

    # ---- exogenous inputs -------------------------------------------------------------------
    def _load_wind(self, day_id: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``[system load, wind]`` [B, 2] MW of step ``t`` of split day ``day_id``."""
        flat = (self._day_start.take(day_id) + t) % self._exogenous.shape[0]
        return self._exogenous.take(flat, axis=0)

    def bus_load_mw(self, load_wind: np.ndarray) -> np.ndarray:
        """Net bus demand [B, n_bus] from ``[system load, wind]`` [B, 2] MW (wind as negative
        load)."""
        load = load_wind[:, :1] * self.bus_shares
        load[:, WIND_BUS] -= load_wind[:, 1]
        return load

    # ---- batched model ----------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> BiddingState:
        day_id = self.check_day_id(day_id)
        b = day_id.size
        return BiddingState(
            day_id,
            np.zeros(b, np.int64),
            np.zeros((b, _N, N_BLOCKS)),
            np.zeros((b, _N)),
            np.zeros((b, _N)),
            np.zeros(b),
        )

    def observe(self, state: BiddingState, obs_mode: str | None = None) -> np.ndarray:
        """Per-agent observations [B, 5, obs_dim] (float32) of ``obs_mode`` (default ``global``)."""
        slots = self.slots_of_mode(obs_mode)
        b = state.t.size
        obs = np.empty((b, _N, slots.width), dtype=np.float32)
        obs[:, :, slots.time] = self._time.take(np.minimum(state.t, HORIZON), axis=0)[:, None, :]
        obs[:, :, slots.market] = self._load_wind(state.day_id, state.t)[:, None, :]
        obs[:, :, slots.own] = self._own
        obs[:, :, slots.own_prev_p] = state.prev_p_mw
        obs[:, :, slots.own_prev_lmp] = state.prev_lmp_gen
        if slots.mean_lmp is not None:
            obs[:, :, slots.mean_lmp] = state.prev_mean_lmp[:, None]
        if slots.own_markups is not None:
            obs[:, :, slots.own_markups] = state.prev_markup
        if slots.all_markups is not None:
            obs[:, :, slots.all_markups] = state.prev_markup.reshape(b, 1, _N * N_BLOCKS)
        return obs

    def _profits(self, gen_p: np.ndarray, lmp_gen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Revenue and true production cost [..., 5] in $/h of dispatch ``gen_p`` paid
        ``lmp_gen``."""
        return lmp_gen * gen_p, self._c0 + self._c1 * gen_p + self._c2 * gen_p * gen_p

    def step(
        self, state: BiddingState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[BiddingState, StepOutput]:
        dt_h = self.spec.dt_h
        b = state.t.size
        load_wind = self._load_wind(state.day_id, state.t)
        load = self.bus_load_mw(load_wind)
        # offers made non-decreasing over each company's blocks (ISO offer rules): sorted
        markup = self.market.monotone_markup(action.reshape(b, _N, N_BLOCKS))
        res = self.market.clear(load, markup)
        gen_p, lmp = res.gen_p_mw, res.lmp_per_mwh
        lmp_gen = lmp[:, self._gen_bus]
        revenue, cost = self._profits(gen_p, lmp_gen)
        profit = (revenue - cost) * dt_h  # [B, 5] each company's own reward
        terms = np.empty((b, 2))
        terms[:, 0] = revenue.sum(axis=1) * dt_h
        terms[:, 1] = -cost.sum(axis=1) * dt_h
        overload = res.overload_mw.sum(axis=1) * dt_h  # MVAh (|S| = |P| under DC power flow)
        positive = np.maximum(load, 0.0)
        mean_lmp = (lmp * positive).sum(axis=1) / np.maximum(positive.sum(axis=1), 1e-9)
        marginal = self._c1 + 2.0 * self._c2 * gen_p
        paid = revenue.sum(axis=1)
        valued = (marginal * gen_p).sum(axis=1)
        abs_flow = np.abs(res.branch_flow_mw)
        new_state = BiddingState(state.day_id, state.t + 1, markup, gen_p, lmp_gen, mean_lmp)
        info = {
            "lmp_per_mwh": lmp,
            "gen_p_mw": gen_p,
            "agent_profit": profit,
            "mean_lmp_per_mwh": mean_lmp,
            "lerner_index": np.where(
                paid > 0, (paid - valued) / np.where(paid > 0, paid, 1.0), 0.0
            ),
            "price_cost_ratio": np.where(valued > 0, paid / np.where(valued > 0, valued, 1.0), 1.0),
            "production_cost": cost.sum(axis=1) * dt_h,
            "as_bid_cost": res.offer_cost_per_h * dt_h,
            "total_load_mw": load_wind[:, 0],
            "wind_mw": load_wind[:, 1],
            "unserved_mw": res.unserved_mw,
            "slack_p_mw": res.unserved_mw - res.spilled_mw,  # emergency power at the reference bus
            "losses_mw": np.zeros(b),  # DC power flow is lossless
            "pf_converged": res.status == "optimal",
            "max_branch_loading": (abs_flow / self._rating).max(axis=1),
            "n_congested_branches": (abs_flow >= self._rating - 1e-6).sum(axis=1),
        }
        return new_state, StepOutput(
            reward=profit,
            reward_terms=terms,
            constraint_costs=overload[:, None],
            terminated=np.zeros(b, dtype=bool),
            action_applied=markup.reshape(b, _N * N_BLOCKS),
            info=info,
        )

    # ---- baselines --------------------------------------------------------------------------
    def truthful_action(self, obs: np.ndarray) -> np.ndarray:
        """Markups 0 (offers at true marginal cost) for observations [B, 5, d]: [B, 15]."""
        return np.zeros((obs.shape[0], _N * N_BLOCKS))

    def rule_based_action(self, obs: np.ndarray) -> np.ndarray:
        """Myopic best response (module docstring) from ``global`` observations [B, 5, d]: [B, 15].

        Clears ``B x 5 x len(BR_GRID)`` markets in one batch: company ``i`` tries every grid
        markup on all its blocks while the others keep their last offers; each keeps the one
        with the highest profit of this step (the lowest markup on ties).
        """
        b, n_grid = obs.shape[0], BR_GRID.size
        load = self.bus_load_mw(obs[:, 0, self._rule_load].astype(np.float64))  # [B, n_bus]
        last = obs[:, 0, self._rule_markups].astype(np.float64).reshape(b, _N, N_BLOCKS)
        trial = np.repeat(last[:, None, None], _N, axis=1).repeat(
            n_grid, axis=2
        )  # [B, i, grid, 5, K]
        own = np.arange(_N)
        trial[:, own, :, own, :] = BR_GRID[None, :, None]
        res = self.market.clear(
            np.repeat(load, _N * n_grid, axis=0), trial.reshape(-1, _N, N_BLOCKS)
        )
        gen_p = res.gen_p_mw.reshape(b, _N, n_grid, _N)[:, own, :, own]  # [i, B, grid]: own output
        lmp = res.lmp_per_mwh[:, self._gen_bus].reshape(b, _N, n_grid, _N)[:, own, :, own]
        revenue, cost = self._profits(
            np.moveaxis(gen_p, 0, -1), np.moveaxis(lmp, 0, -1)
        )  # [B, grid, i]
        best = np.argmax(np.round(revenue - cost, 6), axis=1)  # [B, i]
        return np.repeat(BR_GRID[best], N_BLOCKS, axis=1)


def _shock_mask(steps_per_day: int, n_steps: int) -> np.ndarray:
    """Wind availability [n_steps] of ``renewable_shock``: 0 for ``SHOCK_STEPS`` steps a day from a
    start step drawn per calendar day in ``[SHOCK_FIRST, SHOCK_LAST]`` (fixed seed), else 1."""
    n_days = n_steps // steps_per_day
    starts = np.random.default_rng(SHOCK_SEED).integers(SHOCK_FIRST, SHOCK_LAST + 1, size=n_days)
    step = np.arange(steps_per_day)
    off = (step[None, :] >= starts[:, None]) & (step[None, :] < starts[:, None] + SHOCK_STEPS)
    return np.where(off, 0.0, 1.0).ravel()
