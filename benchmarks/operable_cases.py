"""Operable ratings on the library cases of the ``opf`` task: what was re-rated, and whether the
DC-OPF oracle keeps the overload budget.

Usage::

    python benchmarks/operable_cases.py                       # every case, 4 test days each
    python benchmarks/operable_cases.py --cases case300 case1354pegase --days 2 --out /tmp/op

For each case (the ``opf`` task's library cases, those of ``benchmarks/grid_scale.py``):

- the re-rating record of the case loader (:func:`powerzoo.physics.cases.case_rerating`, or the
  voltage-class one for cases without published ratings): branches re-rated and the overload
  of the soft-limit DC-OPF at 0.45 and 1.1 x the bus loads before re-rating [MW];
- the hard-limit DC-OPF at both levels on the ratings the task uses (``optimal`` = feasible),
  and the soft-limit one's overload and binding branches at the peak level;
- the ``opf`` oracle as the DC-OPF per half-hour with soft limits at 2,000 $/MWh, solved here on
  the test split's loads (``1.1 x demand_pu``; the days with the split's highest and lowest
  half-hour load, plus evenly spaced days up to ``--days``, or all with ``--days 0``): per day
  its overload [MVAh] against the 1 MVAh budget, the share of steps with a congestion price, and
  the steps whose load the units cannot serve (sum Pmin above or sum Pmax below it; not solved).

Writes ``operable_cases.json`` and ``operable_cases.md`` under ``--out`` (default: print only).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

CASES = (
    "case5",
    "case14",
    "case30",
    "case118",
    "case300",
    "case1354pegase",
    "case2869pegase",
    "case9241pegase",
    "case_ACTIVSg10k",
)


def test_day_loads() -> np.ndarray:
    """Load multiples of the case's bus loads of every half-hour of the ``opf`` test split
    ``[days, 48]``: ``1.1 x demand_pu`` of the base scenario (as the dispatch tasks)."""
    from powerzoo.data import calendar
    from powerzoo.data.profiles import get_profiles
    from powerzoo.tasks.transmission import BASE_LOAD_SCALE

    profiles = get_profiles("base", 30)
    steps = profiles.steps_per_day
    days = calendar.split_day_indices("test", 1)
    demand = profiles.series["demand_pu"]
    return BASE_LOAD_SCALE * np.stack([demand[d * steps : (d + 1) * steps] for d in days])


def pick_days(scales: np.ndarray, n_days: int) -> list[int]:
    """Test days: the highest and the lowest half-hour load first, then evenly spaced ones."""
    chosen = [int(scales.max(axis=1).argmax()), int(scales.min(axis=1).argmin())]
    for day in np.linspace(0, scales.shape[0] - 1, max(n_days, 2)).round().astype(int).tolist():
        if len(chosen) >= n_days:
            break
        if day not in chosen:
            chosen.append(day)
    return chosen[:n_days]


def oracle_days(case: Any, scales: np.ndarray, days: list[int]) -> list[dict[str, Any]]:
    """The ``opf`` oracle on each day: the DC-OPF per half-hour with soft limits at 2,000 $/MWh;
    its overload [MVAh/day], the steps with a congestion price and those the units cannot
    serve (sum Pmin above or sum Pmax below the load: not solved)."""
    from powerzoo.physics.dc_opf import solve_dc_opf
    from powerzoo.physics.operable_ratings import OVERLOAD_PRICE_PER_MWH

    pmin, pmax = case.gen_limits_mw
    rows = []
    for day in days:
        load = scales[day] * case.total_load_mw
        servable = (load >= pmin.sum()) & (load <= pmax.sum())
        row: dict[str, Any] = {"day": day, "unservable_steps": int((~servable).sum())}
        if servable.any():
            loads = scales[day, servable, None] * case.bus_pd_mw
            try:
                result = solve_dc_opf(case, loads, soft_line_penalty=OVERLOAD_PRICE_PER_MWH)
            except (RuntimeError, ValueError) as err:
                rows.append({**row, "error": f"{type(err).__name__}: {err}"[:200]})
                continue
            row["thermal_overload_mvah"] = float(result.line_slack_mw.sum() * 0.5)
            binding = (np.abs(result.branch_mu_per_mwh) > 1e-6).any(axis=1)
            row["binding_step_share"] = float(binding.mean())
        rows.append(row)
    return rows


def measure(name: str, n_days: int) -> dict[str, Any]:
    """Every number of one case (module docstring)."""
    from powerzoo.physics.dc_opf import solve_dc_opf
    from powerzoo.physics.operable_ratings import rerating_of
    from powerzoo.tasks.transmission import congestion_ready_case

    t0 = time.perf_counter()
    case = congestion_ready_case(name)
    record = rerating_of(case)
    row: dict[str, Any] = {
        "case": name,
        "n_bus": case.n_bus,
        "n_branch": case.n_branch,
        "summary": record.summary(),
        "basis": record.basis,
        "n_rerated": record.n_rerated,
        "load_scales": record.load_scales.tolist(),
        "checked_scales": record.checked_scales.tolist(),
        "adequate": record.adequate.tolist(),
        "overload_before_mw": record.overload_before_mw.tolist(),
        "new_over_old": (
            [float(np.min(record.new_rating_mw / record.old_rating_mw)),
             float(np.max(record.new_rating_mw / record.old_rating_mw))]
            if record.n_rerated else []
        ),
    }  # fmt: skip
    loads = np.asarray(record.checked_scales)[:, None] * case.bus_pd_mw
    hard = []
    for load in loads:
        try:
            hard.append(str(solve_dc_opf(case, load).status))
        except (RuntimeError, ValueError) as err:
            hard.append(type(err).__name__)
    row["hard_status"] = hard
    soft = solve_dc_opf(case, loads[-1], soft_line_penalty=2000.0)
    row["peak_overload_mw"] = float(soft.line_slack_mw.sum())
    row["peak_binding_branches"] = int((np.abs(soft.branch_mu_per_mwh) > 1e-6).sum())
    scales = test_day_loads()
    days = pick_days(scales, n_days) if n_days > 0 else list(range(scales.shape[0]))
    row["days"] = oracle_days(case, scales, days)
    done = [d for d in row["days"] if "thermal_overload_mvah" in d]
    row["oracle_max_overload_mvah"] = max((d["thermal_overload_mvah"] for d in done), default=None)
    row["days_over_budget"] = sum(d["thermal_overload_mvah"] > 1.0 for d in done)
    row["unservable_steps"] = sum(d["unservable_steps"] for d in row["days"])
    row["seconds"] = time.perf_counter() - t0
    return row


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | buses | ratings | re-rated branches | overload before (trough / peak) MW | "
        "hard DC-OPF (trough / peak) | oracle days | oracle overload MVAh/day (max) | days over "
        "budget | steps with a congestion price | steps the units cannot serve |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        before = " / ".join("-" if np.isnan(v) else f"{v:,.1f}" for v in r["overload_before_mw"])
        done = [d for d in r["days"] if "thermal_overload_mvah" in d]
        share = np.mean([d["binding_step_share"] for d in done]) if done else float("nan")
        over = r["oracle_max_overload_mvah"]
        lines.append(
            f"| `{r['case']}` | {r['n_bus']:,} | {r['basis']} | {r['n_rerated']} | {before} | "
            f"{' / '.join(r['hard_status'])} | {len(r['days'])} | "
            f"{'-' if over is None else f'{over:.3f}'} | {r['days_over_budget']} | {share:.1%} | "
            f"{r['unservable_steps']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--days", type=int, default=4, help="test days per case (0: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name in args.cases:
        row = measure(name, args.days)
        print(json.dumps({k: v for k, v in row.items() if k != "days"}), flush=True)
        for day in row["days"]:
            print("   ", json.dumps(day), flush=True)
        rows.append(row)
    table = _markdown(rows)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "operable_cases.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.out / "operable_cases.md").write_text(table)


if __name__ == "__main__":
    main()
