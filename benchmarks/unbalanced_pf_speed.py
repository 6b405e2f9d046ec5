"""Speed of the batched three-phase unbalanced power flow against OpenDSS, on one BLAS thread.

Usage: python benchmarks/unbalanced_pf_speed.py [--feeder ieee123] [--batches 1 64 1024]
       [--rounds 7] [--opendss-solves 200]

Scenarios: each load of the published loading x U(0.5, 1.5) (seeded); taps either those in the
files or drawn per row (+-10 steps, every row different: the worst case for the low-rank tap
update). Each figure is the best of ``--rounds`` calls, as wall time and as CPU time of this
process (the honest one-core cost when other processes share the cores); a call includes the
input checks and the solve with every node voltage and magnitude (angles, branch currents and
losses are computed on first access: timed separately as "+ all outputs").

OpenDSS (OpenDSSDirect.py) solves the same feeder in the same run with its controls off,
tolerance 1e-10: "solve" is ``Solution.Solve()`` alone, "scenario" also sets every load's kW
and kvar through the API and reads the bus voltages (what a Python caller pays per scenario).
Targets (CPU time): IEEE 123 at B = 1024 >= 5,000 flows/s; the per-flow time of a B = 1024
call <= 1/10 of OpenDSS's per-solve time. Every batch size is timed with both tap cases and
compared with OpenDSS's solve measured in the same process.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from powerzoo.physics.unbalanced import load_feeder, unbalanced_power_flow

TARGET_FLOWS_PER_S = 5_000.0
TARGET_RATIO = 10.0


def _best(call, rounds: int) -> tuple[float, float]:
    """Best wall and CPU seconds of ``rounds`` calls (after one warm-up)."""
    call()
    wall, cpu = np.inf, np.inf
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        call()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def _opendss(feeder, p, q, n: int) -> tuple[float, float, float] | None:
    """Median seconds per OpenDSS solve and per full scenario, and its mean iterations per
    solve (each starts from the previous scenario's voltages), or None without OpenDSS."""
    try:
        import opendssdirect as dss
    except ImportError:
        return None
    here = os.getcwd()
    dss.Text.Command(f'compile "{feeder.master_file}"')
    os.chdir(here)  # OpenDSS's compile moves the process into the master file's folder
    for command in ("set controlmode=off", "set tolerance=1e-10", "set maxiterations=1000"):
        dss.Text.Command(command)
    dss.Text.Command("batchedit load..* vminpu=0.5 vmaxpu=10")
    solve, scenario, iterations = [], [], []
    for b in range(n):
        t0 = time.perf_counter()
        for k, name in enumerate(feeder.load_names):
            dss.Loads.Name(name)
            dss.Loads.kW(float(p[b % len(p), k]))
            dss.Loads.kvar(float(q[b % len(q), k]))
        t1 = time.perf_counter()
        dss.Solution.Solve()
        t2 = time.perf_counter()
        iterations.append(dss.Solution.Iterations())
        dss.Circuit.AllBusMagPu()
        t3 = time.perf_counter()
        solve.append(t2 - t1)
        scenario.append(t3 - t0)
    return float(np.median(solve)), float(np.median(scenario)), float(np.mean(iterations))


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeder", default="ieee123")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--opendss-solves", type=int, default=200)
    args = parser.parse_args()

    feeder = load_feeder(args.feeder)
    n_max = max(args.batches)
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.5, 1.5, size=(n_max, feeder.n_loads))
    p, q = feeder.p_kw * scale, feeder.q_kvar * scale
    steps = rng.integers(-10, 11, size=(n_max, feeder.n_regulators))
    taps = feeder.taps_from_steps(steps)
    unbalanced_power_flow(feeder, p[:1], q[:1])  # factorisation (cached per feeder)
    print(
        f"feeder {args.feeder}: {feeder.n_bus} buses, {feeder.n_node} nodes, "
        f"{feeder.n_loads} loads ({len(feeder.load_phase_from)} load phases), "
        f"{feeder.n_regulators} regulators; best of {args.rounds} calls (cpu time)"
    )
    ref = _opendss(feeder, p, q, args.opendss_solves)
    if ref is None:
        print("OpenDSS: opendssdirect not installed, no comparison")
    else:
        print(
            f"OpenDSS ({args.opendss_solves} scenarios, median): solve {ref[0] * 1e6:.1f} us, "
            f"scenario (set loads + solve + read voltages) {ref[1] * 1e6:.1f} us, "
            f"{ref[2]:.1f} iterations per solve (warm: from the previous scenario)"
        )
    per_flow = {}
    for n in args.batches:
        for label, t in (("file taps", None), ("taps per row", taps[:n])):

            def everything(t=t, n=n):
                """A call that also reads every lazily computed output."""
                res = unbalanced_power_flow(feeder, p[:n], q[:n], t)
                return res.va_deg, res.branch_current, res.branch_losses_kw, res.load_kw

            res = unbalanced_power_flow(feeder, p[:n], q[:n], t)
            _, cpu = _best(
                lambda t=t, n=n: unbalanced_power_flow(feeder, p[:n], q[:n], t), args.rounds
            )
            _, cpu_all = _best(everything, args.rounds)
            per_flow[(n, label)] = cpu / n
            ratio = "" if ref is None else f"  {ref[0] / (cpu / n):5.1f}x OpenDSS's solve"
            print(
                f"  N = {n:5d} {label:13s} {cpu * 1e3:8.2f} ms  {n / cpu:8.0f} flows/s  "
                f"{cpu / n * 1e6:7.1f} us/flow{ratio}  (+ all outputs {cpu_all / n * 1e6:6.1f} "
                f"us/flow)  iterations {res.iterations}, converged {int(res.converged.sum())}/{n}"
            )
    if n_max >= 1024:
        worst = max(per_flow[(n_max, "file taps")], per_flow[(n_max, "taps per row")])
        ok = 1.0 / worst >= TARGET_FLOWS_PER_S
        print(
            f"target >= {TARGET_FLOWS_PER_S:.0f} flows/s at N = {n_max} (slower tap case): "
            f"{1.0 / worst:.0f} -> {'met' if ok else 'NOT met'}"
        )
        if ref is not None:
            ok = ref[0] / worst >= TARGET_RATIO
            print(
                f"target >= {TARGET_RATIO:.0f}x OpenDSS's solve per flow at N = {n_max}: "
                f"{ref[0] / worst:.1f}x -> {'met' if ok else 'NOT met'}"
            )


if __name__ == "__main__":
    main()
