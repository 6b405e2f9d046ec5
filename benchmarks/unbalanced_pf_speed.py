"""Speed of the batched three-phase unbalanced power flow against OpenDSS, on one BLAS thread.

Usage: python benchmarks/unbalanced_pf_speed.py [--feeder ieee123] [--batch 1024]
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
call <= 1/10 of OpenDSS's per-solve time.
"""

from __future__ import annotations

import argparse
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


def _opendss(feeder, p, q, n: int) -> tuple[float, float] | None:
    """Median seconds per OpenDSS solve and per full scenario, or None without OpenDSS."""
    try:
        import opendssdirect as dss
    except ImportError:
        return None
    dss.Text.Command(f'compile "{feeder.master_file}"')
    for command in ("set controlmode=off", "set tolerance=1e-10", "set maxiterations=1000"):
        dss.Text.Command(command)
    dss.Text.Command("batchedit load..* vminpu=0.5 vmaxpu=10")
    solve, scenario = [], []
    for b in range(n):
        t0 = time.perf_counter()
        for k, name in enumerate(feeder.load_names):
            dss.Loads.Name(name)
            dss.Loads.kW(float(p[b % len(p), k]))
            dss.Loads.kvar(float(q[b % len(q), k]))
        t1 = time.perf_counter()
        dss.Solution.Solve()
        t2 = time.perf_counter()
        dss.Circuit.AllBusMagPu()
        t3 = time.perf_counter()
        solve.append(t2 - t1)
        scenario.append(t3 - t0)
    return float(np.median(solve)), float(np.median(scenario))


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeder", default="ieee123")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--opendss-solves", type=int, default=200)
    args = parser.parse_args()

    feeder = load_feeder(args.feeder)
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.5, 1.5, size=(args.batch, feeder.n_loads))
    p, q = feeder.p_kw * scale, feeder.q_kvar * scale
    steps = rng.integers(-10, 11, size=(args.batch, feeder.n_regulators))
    taps = feeder.taps_from_steps(steps)
    unbalanced_power_flow(feeder, p[:1], q[:1])  # factorisation (cached per feeder)

    def everything(t):
        """A call that also reads every lazily computed output."""
        res = unbalanced_power_flow(feeder, p, q, t)
        outputs = (res.va_deg, res.branch_current, res.branch_losses_kw, res.load_kw)
        return res, outputs, res.source_kw

    print(
        f"feeder {args.feeder}: {feeder.n_bus} buses, {feeder.n_node} nodes, "
        f"{feeder.n_loads} loads ({len(feeder.load_phase_from)} load phases), "
        f"{feeder.n_regulators} regulators; B = {args.batch}, best of {args.rounds}"
    )
    rows = {}
    for label, t in (("file taps", None), ("taps per row", taps)):
        res = unbalanced_power_flow(feeder, p, q, t)
        for what, call in (
            ("solve", lambda t=t: unbalanced_power_flow(feeder, p, q, t)),
            ("+ all outputs", lambda t=t: everything(t)),
        ):
            wall, cpu = _best(call, args.rounds)
            rows[(label, what)] = cpu
            print(
                f"  {label:13s} {what:14s} wall {wall * 1e3:7.1f} ms  cpu {cpu * 1e3:7.1f} ms"
                f"  {args.batch / cpu:8.0f} flows/s (cpu)  {cpu / args.batch * 1e6:6.1f} us/flow"
                f"  iterations {res.iterations}, converged {int(res.converged.sum())}"
            )
    wall1, cpu1 = _best(lambda: unbalanced_power_flow(feeder, p[0], q[0], taps[0]), args.rounds)
    print(f"  B = 1 (taps moved): wall {wall1 * 1e3:.2f} ms, cpu {cpu1 * 1e3:.2f} ms")

    ref = _opendss(feeder, p, q, args.opendss_solves)
    worst = max(rows[("taps per row", "solve")], rows[("file taps", "solve")]) / args.batch
    if ref is None:
        print("OpenDSS: opendssdirect not installed, no comparison")
    else:
        solve, scenario = ref
        print(
            f"OpenDSS ({args.opendss_solves} scenarios, median): solve {solve * 1e6:.1f} us, "
            f"scenario (set loads + solve + read voltages) {scenario * 1e6:.1f} us"
        )
        print(
            f"  per-flow speed-up of B = {args.batch} (taps per row): "
            f"{solve / worst:.1f}x OpenDSS's solve, {scenario / worst:.1f}x its scenario"
        )
        ok = solve / worst >= TARGET_RATIO
        print(f"  target >= {TARGET_RATIO:.0f}x OpenDSS's solve: {'met' if ok else 'NOT met'}")
    flows = args.batch / max(rows[("taps per row", "solve")], rows[("file taps", "solve")])
    ok = flows >= TARGET_FLOWS_PER_S
    print(
        f"target >= {TARGET_FLOWS_PER_S:.0f} flows/s (slower of the two tap cases, cpu): "
        f"{flows:.0f} -> {'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
