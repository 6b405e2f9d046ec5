"""Speed of the batched AC power flow (``powerzoo.physics.ac_pf``) against pandapower's runpp.

For each case: flows per second at batch size N (load scenarios: every load scaled by its own
factor in [0.9, 1.1], drawn before the clock), milliseconds for a single flow, and pandapower's
``runpp`` (same model settings, ``numba`` as installed) milliseconds per call in the same run.
One core: BLAS / OpenMP threads are pinned to 1 before numpy is imported.

    python benchmarks/ac_flow_speed.py                     # case118 N=1024, case2869pegase N=256
    python benchmarks/ac_flow_speed.py --cases case300:64 GBnetwork:256 --repeats 5

Targets: case118 >= 20,000 flows/s at N = 1,024; case2869pegase >= 500 flows/s at N = 256; a
single flow at least 20x faster than runpp on the same case.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402


def load_scenarios(net, base_p, base_q, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` scenarios of net injections with each load scaled by a factor in [0.9, 1.1]."""
    rng = np.random.default_rng(seed)
    position = {b: k for k, b in enumerate(net.bus.index)}
    load_bus = np.array([position[b] for b in net.load.bus])
    p_load = (net.load.p_mw * net.load.scaling).to_numpy()
    q_load = (net.load.q_mvar * net.load.scaling).to_numpy()
    change = rng.uniform(-0.1, 0.1, (n, load_bus.size))
    p = np.repeat(base_p[None], n, axis=0)
    q = np.repeat(base_q[None], n, axis=0)
    rows = np.repeat(np.arange(n), load_bus.size)
    cols = np.tile(load_bus, n)
    np.add.at(p, (rows, cols), -(change * p_load).ravel())
    np.add.at(q, (rows, cols), -(change * q_load).ravel())
    return p, q


def best_time(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["case118:1024", "case2869pegase:256"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import pandapower as pp

    from powerzoo.physics.ac_network import PANDAPOWER_PF_OPTIONS

    pp_options = dict(PANDAPOWER_PF_OPTIONS, tolerance_mva=1e-8, max_iteration=10)
    try:
        import numba  # noqa: F401

        pp_options["numba"] = True
    except ImportError:
        pass
    print(f"one core; pandapower {pp.__version__} runpp numba={pp_options['numba']}")
    header = (
        f"{'case':>16} {'N':>6} {'flows/s':>10} {'iters':>6} {'single ms':>10} "
        f"{'runpp ms':>9} {'speed-up':>9}"
    )
    print(header)
    for spec in args.cases:
        name, _, size = spec.partition(":")
        measure(name, int(size or 256), args.repeats, pp_options)


def measure(name: str, n: int, repeats: int, pp_options: dict) -> None:
    """Print one table row for case ``name`` at batch size ``n``."""
    import pandapower as pp

    from powerzoo.physics.ac_network import _pandapower_net, ac_network
    from powerzoo.physics.ac_pf import ac_power_flow

    network = ac_network(name)
    net = _pandapower_net(name)
    p, q = load_scenarios(net, network.p_mw, network.q_mvar, n)
    ac_power_flow(network, p[:2], q[:2])  # builds the per-network factorisation
    batch = best_time(lambda: ac_power_flow(network, p, q), repeats)
    result = ac_power_flow(network, p, q)
    if not result.converged.all():
        print(f"  warning: {int((~result.converged).sum())} rows did not converge")
    single = best_time(lambda: ac_power_flow(network, p[0], q[0]), 5 * repeats)
    pp.runpp(net, **pp_options)
    runpp = best_time(lambda: pp.runpp(net, **pp_options), repeats)
    print(
        f"{name:>16} {n:>6} {n / batch:>10,.0f} {result.iterations.max():>6} "
        f"{single * 1e3:>10.2f} {runpp * 1e3:>9.1f} {runpp / single:>8.0f}x"
    )


if __name__ == "__main__":
    main()
