"""Cost growth with network size: µs per env-step (DC dispatch) and per AC flow against buses.

Usage::

    python benchmarks/grid_scale.py                          # case5 ... case_ACTIVSg10k
    python benchmarks/grid_scale.py --cases case5 case118 --seconds 0.5 --out /tmp/grid

For each case and batch size N (1 and 256), each point in a fresh subprocess pinned to one BLAS
thread (its peak memory, ru_maxrss, is its own):

- **DC**: µs per env-step of the ``opf`` task on that case (``make_env("opf", case=...)``; the
  PettingZoo env at N = 1, the native batched env at N = 256), random actions drawn before the
  clock, episode resets included. Timed in windows of whole episodes until ``--seconds`` have
  passed and at least two windows were taken; the fastest window is kept (on a shared machine the
  noise only adds time).
- **AC**: µs per flow of :func:`powerzoo.physics.ac_pf.ac_power_flow` on the case's own net
  injections with every load scaled by its own factor in [0.9, 1.1] per row (drawn before the
  clock); N = 1 is a single flow (1-D injections). The fastest call is kept.
- **pandapower**: ``rundcpp`` and ``runpp`` (the settings the AC model reproduces) ms per call on
  the same case in the same run: the median of a few calls after one warm-up, capped by time.

A case that cannot build the ``opf`` env or the AC network is skipped for that kind, with the
reason printed. Writes ``grid_scale.{md,csv,json,png}`` under ``--out`` (the Markdown table and a
log-log plot of µs per env-step / per flow against the number of buses).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
SIZES = (1, 256)
POOL_BYTES = 32 * 2**20  # at most this much pre-drawn action data per DC point
PP_CALLS = 5  # pandapower calls per function (after a warm-up), fewer when over the time cap

# One DC point: the opf env on a case at batch size N; prints one JSON line.
_DC_CHILD = r"""
import json, resource, sys, time, warnings
case, num_envs, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
pool_bytes = int(sys.argv[4])
warnings.simplefilter("ignore")
import numpy as np
from powerzoo.physics.cases import load_case
from powerzoo.rl import make_env
from powerzoo.tasks import task_spec
n_bus = int(load_case(case).bus_id.size)
horizon = task_spec("opf").horizon
single = num_envs == 1
t0 = time.perf_counter()
env = make_env("opf", case=case, framework="pettingzoo", num_envs=None if single else num_envs,
               seed=0)
build_s = time.perf_counter() - t0
env.reset(seed=0)
agents = list(env.possible_agents)
spaces = [env.action_space(a) for a in agents]
per_call = sum(int(np.prod(s.shape)) for s in spaces) * 4
n_pool = int(max(4, min(256, pool_bytes // max(per_call, 1))))
rng = np.random.default_rng(0)
draws = [rng.uniform(s.low, s.high, size=(n_pool,) + s.shape).astype(np.float32) for s in spaces]
pool = [dict(zip(agents, [d[i] for d in draws])) for i in range(n_pool)]

def run(n_calls):
    for i in range(n_calls):
        env.step(pool[i % n_pool])
        if single and not env.agents:
            env.reset()

run(min(n_pool, 8))  # warm-up
t0 = time.perf_counter(); run(4); per_call = (time.perf_counter() - t0) / 4
window = horizon * max(1, int(np.ceil(seconds / 3 / (per_call * horizon))))
walls = []
while sum(walls) < seconds or len(walls) < 2:
    t0 = time.perf_counter(); run(window); walls.append(time.perf_counter() - t0)
print(json.dumps({"n_bus": n_bus, "us": min(walls) / (window * num_envs) * 1e6,
                  "build_s": build_s, "agents": len(agents),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

# One AC point: ac_power_flow on N rows of the scenarios file; prints one JSON line.
_AC_CHILD = r"""
import json, resource, sys, time, warnings
case, num_envs, seconds, path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
warnings.simplefilter("ignore")
import numpy as np
from powerzoo.physics.ac_network import ac_network
from powerzoo.physics.ac_pf import ac_power_flow
network = ac_network(case)
data = np.load(path)
p, q = data["p_mw"][:num_envs], data["q_mvar"][:num_envs]
if num_envs == 1:
    p, q = p[0], q[0]
result = ac_power_flow(network, p, q)  # warm-up: builds the per-network factorisation
converged = float(np.mean(result.converged))
times = []
while sum(times) < seconds or len(times) < 3:
    t0 = time.perf_counter(); ac_power_flow(network, p, q); times.append(time.perf_counter() - t0)
print(json.dumps({"n_bus": int(network.p_mw.size), "us": min(times) / num_envs * 1e6,
                  "converged": converged,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

# pandapower's rundcpp / runpp on the case, and the AC load scenarios (pandapower's load table).
_PP_CHILD = r"""
import json, resource, statistics, sys, time, warnings
case, rows, cap_s, path, calls = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                                  int(sys.argv[5]))
warnings.simplefilter("ignore")
import logging
logging.disable(logging.WARNING)
import numpy as np
import pandapower as pp
from powerzoo.physics.ac_network import PANDAPOWER_PF_OPTIONS
from powerzoo.physics.matpower_cases import pandapower_net
net = pandapower_net(case)
out = {"n_bus": int(len(net.bus))}
if rows > 0:  # load scenarios for the AC points, on the case's default injections
    from powerzoo.physics.ac_network import ac_network
    network = ac_network(case)
    rng = np.random.default_rng(0)
    position = {b: k for k, b in enumerate(net.bus.index)}
    load_bus = np.array([position[b] for b in net.load.bus], dtype=int)
    change = rng.uniform(-0.1, 0.1, (rows, load_bus.size))
    p = np.repeat(network.p_mw[None], rows, axis=0)
    q = np.repeat(network.q_mvar[None], rows, axis=0)
    rows_ix = np.repeat(np.arange(rows), load_bus.size)
    cols = np.tile(load_bus, rows)
    np.add.at(p, (rows_ix, cols), -(change * (net.load.p_mw * net.load.scaling).to_numpy()).ravel())
    np.add.at(q, (rows_ix, cols),
              -(change * (net.load.q_mvar * net.load.scaling).to_numpy()).ravel())
    np.savez(path, p_mw=p, q_mvar=q)
options = dict(PANDAPOWER_PF_OPTIONS, tolerance_mva=1e-8, max_iteration=10)
for key, fn, kwargs in (("pp_dc_ms", pp.rundcpp, {}), ("pp_ac_ms", pp.runpp, options)):
    try:
        t0 = time.perf_counter(); fn(net, **kwargs); first = time.perf_counter() - t0
        times, start = [], time.perf_counter()
        while len(times) < calls and (time.perf_counter() - start) + first < cap_s:
            t0 = time.perf_counter(); fn(net, **kwargs); times.append(time.perf_counter() - t0)
        out[key] = statistics.median(times or [first]) * 1e3
    except Exception as exc:  # a case pandapower cannot solve: reported, not fatal
        out[key + "_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def _child(script: str, *args: Any, timeout: float = 900.0) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter pinned to one BLAS thread; its last JSON line, or
    ``{"error": reason}`` when it failed."""
    threads = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True,
            text=True,
            env={**os.environ, **threads},
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if out.returncode != 0:
        lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
        return {"error": lines[-1] if lines else f"exit status {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_case(case: str, seconds: float, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """One table row for ``case``: DC env-step and AC flow µs (and peak MB) at each N, and
    pandapower's rundcpp / runpp ms per call. Skipped parts are printed and left out."""
    row: dict[str, Any] = {"case": case}
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = Path(tmp) / "scenarios.npz"
        cap_s = max(2.0, 4 * seconds)
        pp_out = _child(_PP_CHILD, case, max(sizes), cap_s, scenarios, PP_CALLS)
        if "error" in pp_out:  # no AC network (or no pandapower net): time pandapower alone
            print(f"  {case}: no AC load scenarios ({pp_out['error']}); AC skipped")
            pp_out = _child(_PP_CHILD, case, 0, cap_s, scenarios, PP_CALLS)
        if "error" in pp_out:
            print(f"  {case}: pandapower skipped: {pp_out['error']}")
        else:
            row["n_bus"] = pp_out["n_bus"]
            for key in ("pp_dc_ms", "pp_ac_ms"):
                if key in pp_out:
                    row[key] = pp_out[key]
                else:
                    print(f"  {case}: pandapower {key[3:5]} skipped: {pp_out[key + '_error']}")
        for kind in ("dc", "ac"):
            if kind == "ac" and not scenarios.exists():
                continue
            for n in sizes:
                if kind == "dc":
                    out = _child(_DC_CHILD, case, n, seconds, POOL_BYTES)
                else:
                    out = _child(_AC_CHILD, case, n, seconds, scenarios)
                if "error" in out:
                    print(f"  {case}: {kind.upper()} N={n} skipped: {out['error']}")
                    break  # the same reason holds at every N
                row.setdefault("n_bus", out["n_bus"])
                row[f"{kind}_us_n{n}"] = out["us"]
                row[f"{kind}_mb_n{n}"] = out["peak_mb"]
                if kind == "ac" and out["converged"] < 1.0:
                    print(f"  {case}: AC N={n}: {1 - out['converged']:.1%} of rows not converged")
    return row


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key == "case":
        return f"`{value}`"
    if key == "n_bus" or "_mb_" in key:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def markdown_table(rows: list[dict[str, Any]], sizes: tuple[int, ...] = SIZES) -> str:
    """The sweep as a Markdown table: one line per case, "–" where a part was skipped."""
    columns = _columns(sizes)
    lines = [
        "| " + " | ".join(header for _, header in columns) + " |",
        "|---|" + "---:|" * (len(columns) - 1),
    ]
    for row in rows:
        lines.append("| " + " | ".join(_cell(k, row.get(k)) for k, _ in columns) + " |")
    return "\n".join(lines) + "\n"


def _columns(sizes: tuple[int, ...]) -> list[tuple[str, str]]:
    """COLUMNS for the batch sizes measured (the headers name N)."""
    out = [("case", "case"), ("n_bus", "buses")]
    for kind, unit in (("dc", "µs/step"), ("ac", "µs/flow")):
        out += [(f"{kind}_us_n{n}", f"{kind.upper()} {unit} N={n}") for n in sizes]
    out += [("pp_dc_ms", "pandapower DC ms"), ("pp_ac_ms", "pandapower AC ms")]
    for kind in ("dc", "ac"):
        out += [(f"{kind}_mb_n{n}", f"{kind.upper()} MB N={n}") for n in sizes]
    return out


def write_results(
    rows: list[dict[str, Any]], out_dir: Path, sizes: tuple[int, ...] = SIZES
) -> list[Path]:
    """``grid_scale.{md,csv,json,png}`` in ``out_dir``: the table, the data and a log-log plot of
    µs per env-step / per flow (pandapower: per call) against the number of buses."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"grid_scale.{ext}" for ext in ("md", "csv", "json", "png")]
    paths[0].write_text(markdown_table(rows, sizes))
    keys = [k for k, _ in _columns(sizes)]
    with paths[1].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    paths[2].write_text(json.dumps(rows, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [(f"dc_us_n{n}", f"DC env-step, N = {n}", 1.0) for n in sizes]
    lines += [(f"ac_us_n{n}", f"AC flow, N = {n}", 1.0) for n in sizes]
    lines += [("pp_dc_ms", "pandapower rundcpp", 1e3), ("pp_ac_ms", "pandapower runpp", 1e3)]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for key, label, scale in lines:
        mine = sorted((r for r in rows if r.get(key) and r.get("n_bus")), key=lambda r: r["n_bus"])
        if mine:
            style = "--" if key.startswith("pp") else "-"
            ax.plot(
                [r["n_bus"] for r in mine],
                [r[key] * scale for r in mine],
                style,
                marker="o",
                label=label,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("buses")
    ax.set_ylabel("µs per env-step / per flow / per call (one core)")
    ax.set_title("PowerZoo grid cost against network size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[3], dpi=120)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> None:
    """Measure every case of ``--cases``, print the table and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="case names")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="timed seconds per point (default 1)"
    )
    parser.add_argument(
        "--num-envs", nargs="+", type=int, default=list(SIZES), help="batch sizes (default 1 256)"
    )
    parser.add_argument("--out", default="results/grid_scale", help="output folder")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or any(n < 1 for n in args.num_envs):
        parser.error("--seconds and --num-envs must be positive")
    sizes = tuple(sorted(set(args.num_envs)))
    print("one core per point (BLAS threads = 1), fresh subprocess per point")
    rows = []
    for case in args.cases:
        print(f"{case} ...", flush=True)
        rows.append(measure_case(case, args.seconds, sizes))
    table = markdown_table(rows, sizes)
    print(table)
    for path in write_results(rows, Path(args.out), sizes):
        print(f"wrote {path}")
    if not all(math.isfinite(v) for r in rows for v in r.values() if isinstance(v, float)):
        print("warning: non-finite figures in the table")


if __name__ == "__main__":
    main()
