"""Sparse DC power flow at scale: factorisation, one flow, batched flows, memory, vs pandapower.

Per case: the time to build and factorise the reduced bus susceptance matrix
(:func:`powerzoo.physics.dc_sparse.dc_factor`), one flow (N = 1) in microseconds, flows per
second at N = 256 (:func:`powerzoo.physics.dc_power_flow.dc_power_flow`), the peak Python
memory of factorising + one N = 256 call (tracemalloc), and pandapower's ``rundcpp`` per call
in the same run. Random injections are drawn before the clock; BLAS runs on one thread (one
core, unless ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` are set). Usage::

    python benchmarks/dc_flow_scale.py [--cases case118 case2383wp ...] [--repeats 20]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import tracemalloc
import warnings

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy is imported

import numpy as np  # noqa: E402

from powerzoo.physics.cases import load_case  # noqa: E402
from powerzoo.physics.dc_power_flow import dc_power_flow  # noqa: E402
from powerzoo.physics.dc_sparse import dc_factor  # noqa: E402

DEFAULT_CASES = ("case118", "case2383wp", "case2869pegase", "case9241pegase")


def _best(fn, repeats: int) -> float:
    """Best wall time [s] of ``repeats`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(name: str, repeats: int, pp_repeats: int) -> dict[str, float]:
    """The numbers of one case (module docstring)."""
    import dataclasses

    import pandapower as pp

    from powerzoo.physics.matpower_cases import pandapower_net

    case = load_case(name)
    rng = np.random.default_rng(0)
    one = rng.normal(0.0, 10.0, (1, case.n_bus))
    batch = rng.normal(0.0, 10.0, (256, case.n_bus))
    fresh = dataclasses.replace(case)  # a new object: nothing cached for it yet
    tracemalloc.start()
    start = time.perf_counter()
    dc_factor(fresh)
    factor_s = time.perf_counter() - start
    dc_power_flow(fresh, batch)
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    dc_power_flow(case, batch)  # warm
    one_s = _best(lambda: dc_power_flow(case, one), repeats)
    batch_s = _best(lambda: dc_power_flow(case, batch), max(3, repeats // 5))
    logging.getLogger("pandapower").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = pandapower_net(name)
        pp_s = _best(lambda: pp.rundcpp(net, trafo_model="pi"), pp_repeats)
    return {
        "n_bus": case.n_bus,
        "n_branch": case.n_branch,
        "factor_ms": factor_s * 1e3,
        "one_flow_us": one_s * 1e6,
        "flows_per_s_256": 256 / batch_s,
        "peak_mb": peak_mb,
        "pandapower_ms": pp_s * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES))
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--pp-repeats", type=int, default=5)
    args = parser.parse_args()
    header = (
        f"{'case':<16}{'buses':>7}{'branches':>9}{'factor ms':>11}{'N=1 us':>9}"
        f"{'flows/s N=256':>15}{'peak MB':>9}{'rundcpp ms':>12}"
    )
    print(header)
    for name in args.cases:
        r = measure(name, args.repeats, args.pp_repeats)
        print(
            f"{name:<16}{r['n_bus']:>7}{r['n_branch']:>9}{r['factor_ms']:>11.1f}"
            f"{r['one_flow_us']:>9.0f}{r['flows_per_s_256']:>15,.0f}{r['peak_mb']:>9.1f}"
            f"{r['pandapower_ms']:>12.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
