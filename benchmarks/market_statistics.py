"""Price statistics of every market (:mod:`powerzoo.data.markets`), and the battery oracle.

Usage::

    python benchmarks/market_statistics.py                 # test split, every market
    python benchmarks/market_statistics.py --stress        # and every stress split
    python benchmarks/market_statistics.py --wear 15       # the oracle at another wear cost

For each market and split it prints the statistics of :func:`powerzoo.data.markets.price_statistics`
on the hourly prices of the split's days (:func:`split_days`: every day its one-day episodes start
on, and their look-ahead day; the 70 test days for ``test``), and the ``battery_arbitrage``
oracle (the task's perfect-foresight LP, one per episode, on the task's own episodes of the split,
with the end-of-day settlement) at ``--wear`` $/MWh per leg: its mean daily return in $/kW-year
(x 365 / the 25 MW rating in kW), the share of its days on which it trades at all, and the number of
steps in which its LP both charges and discharges (the task applies only the net power, which is
the LP's plan only when that never happens).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from powerzoo.data import calendar
from powerzoo.data.markets import MARKETS, price_statistics
from powerzoo.data.profiles import get_profiles

TRADE_TOLERANCE_MW = 1e-6  # |power| below this is no trade
SIMULTANEOUS_TOLERANCE_MW = 1e-6  # charge and discharge both above this in one step


def split_days(split: str) -> np.ndarray:
    """Calendar days of ``split`` the statistics are taken on: the start days of its one-day
    episodes and the look-ahead day after each (all 70 test days for ``test``)."""
    starts = calendar.split_day_indices(split, 1)
    return np.unique(np.concatenate([starts, starts + 1]))


def hourly_prices(split: str, market: str) -> np.ndarray:
    """Hourly prices [N_DAYS, 24] ($/MWh) of the scenario ``split`` reads under ``market``."""
    profiles = get_profiles(calendar.scenario_of_split(split), 60, market)
    return profiles.series["price_per_mwh"][: calendar.N_DAYS * 24].reshape(calendar.N_DAYS, 24)


def battery_oracle(split: str, market: str, wear: float) -> dict[str, float]:
    """The ``battery_arbitrage`` oracle on every episode of ``split``: ``kw_year`` (mean daily
    return x 365 / rating in kW), ``trading_day_share``, ``simultaneous_steps`` (steps whose LP
    solution charges and discharges at once) and ``days``."""
    import powerzoo.tasks.battery_arbitrage as module
    from powerzoo.tasks import make_task

    solved = []
    real_new_highs = module.new_highs

    def recording_new_highs(*args, **kwargs):
        h = real_new_highs(*args, **kwargs)
        solved.append(h)
        return h

    task = make_task("battery_arbitrage", split, market=market, degradation_cost_per_mwh=wear)
    rng = np.random.default_rng(0)
    state = task.reset(rng, np.arange(task.n_days))
    module.new_highs = recording_new_highs
    try:
        plan = task.oracle_plan(state)
    finally:
        module.new_highs = real_new_highs
    horizon = plan.shape[1]
    simultaneous = 0
    for h in solved:  # columns: charge [H], discharge [H], stored [H], surplus, deficit
        col = np.asarray(h.getSolution().col_value)
        charge, discharge = col[:horizon], col[horizon : 2 * horizon]
        simultaneous += int(
            np.sum((charge > SIMULTANEOUS_TOLERANCE_MW) & (discharge > SIMULTANEOUS_TOLERANCE_MW))
        )
    total = np.zeros(task.n_days)
    for t in range(horizon):
        state, out = task.step(state, plan[:, t, :], rng)
        total += out.reward
    rating_kw = float(task.battery.power_max_mw) * 1000.0
    return {
        "kw_year": float(total.mean() * 365.0 / rating_kw),
        "trading_day_share": float(np.mean(np.abs(plan).max(axis=(1, 2)) > TRADE_TOLERANCE_MW)),
        "simultaneous_steps": simultaneous,
        "days": task.n_days,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stress", action="store_true", help="also every stress split")
    parser.add_argument("--wear", type=float, default=7.5, help="oracle wear, $/MWh per leg")
    args = parser.parse_args()
    splits = ("test",) + (calendar.STRESS_SPLITS if args.stress else ())
    header = (
        f"{'market':15s} {'split':14s} {'days':>4s} {'mean':>6s} {'tb4_mean':>8s} "
        f"{'tb4_med':>7s} {'neg_%':>5s} {'h>1000/y':>8s} {'d>1000':>6s} {'min':>6s} {'max':>6s}"
        f" | {'$/kW-y':>7s} {'trade':>5s} {'both':>4s}"
    )
    print(f"battery_arbitrage oracle at {args.wear:g} $/MWh wear per leg")
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    for market in MARKETS:
        for split in splits:
            s = price_statistics(hourly_prices(split, market), split_days(split))
            o = battery_oracle(split, market, args.wear)
            print(
                f"{market:15s} {split:14s} {s['days']:4d} {s['mean']:6.1f} {s['tb4_mean']:8.1f} "
                f"{s['tb4_median']:7.1f} {100 * s['negative_hour_share']:5.1f} "
                f"{s['hours_above_1000_per_year']:8.1f} {s['days_above_1000']:6d} "
                f"{s['min']:6.1f} {s['max']:6.0f} | {o['kw_year']:7.1f} "
                f"{o['trading_day_share']:5.2f} {o['simultaneous_steps']:4d}"
            )
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
