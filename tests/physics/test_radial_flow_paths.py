"""The unchecked flow of the feeder tasks (``solve_flow``) against the checked public one, and
the result's convergence flag, on the dense and level-sweep paths."""

from __future__ import annotations

import numpy as np
import pytest

from powerzoo.physics.cases import load_case
from powerzoo.physics.radial_pf import radial_power_flow, solve_flow

FIELDS = (
    "vm_pu",
    "v_complex_pu",
    "branch_current_pu",
    "p_loss_mw",
    "q_loss_mvar",
    "feeder_p_mw",
    "feeder_q_mvar",
    "branch_loading",
    "converged",
)


def _loads(case, batch: int, seed: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    factor = scale * rng.uniform(0.3, 1.2, (batch, case.n_bus))
    return case.bus_pd_mw * factor, case.bus_qd_mvar * factor


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    ("name", "batch", "method"),
    [
        ("case33bw", 1, "auto"),
        ("case33bw", 4, "dense"),
        ("case33bw", 4, "sweep"),
        ("case141", 1, "auto"),
        ("case141", 3, "sweep"),
    ],
)
def test_solve_flow_gives_the_bits_of_radial_power_flow(name, batch, method):
    case = load_case(name)
    p, q = _loads(case, batch, seed=batch)
    head = np.linspace(0.99, 1.03, batch)
    cold = radial_power_flow(case, p, q, slack_vm_pu=head, method=method)
    p2, q2 = p * 1.07, q * 0.95  # the next step's loads, warm-started from the last voltages
    checked = radial_power_flow(
        case, p2, q2, slack_vm_pu=head, v_init=cold.v_complex_pu, max_iter=30, method=method
    )
    unchecked = solve_flow(
        case,
        p2,
        q2,
        head.astype(np.complex128),
        np.array(cold.v_complex_pu),
        max_iter=30,
        method=method,
    )
    assert checked.converged.all() and checked.all_converged and unchecked.all_converged
    assert unchecked.iterations == checked.iterations >= 1
    for field in FIELDS:
        assert _same_bits(getattr(unchecked, field), getattr(checked, field)), field
    # the flow itself is right: the head's power balances the loads and the losses
    np.testing.assert_allclose(
        checked.feeder_p_mw, p2.sum(axis=1) + checked.p_loss_mw, rtol=0, atol=1e-9
    )


def test_the_convergence_flag_follows_the_rows():
    case = load_case("case33bw")
    p, q = _loads(case, 3, seed=0)
    p[1] *= 60.0  # far beyond the feeder's loadability: no solution
    q[1] *= 60.0
    result = radial_power_flow(case, p, q)
    assert result.converged.tolist() == [True, False, True]
    assert result.all_converged is False
    # the failed row's last iterate is reported finite
    assert np.isfinite(result.vm_pu).all() and np.isfinite(result.branch_loading).all()
    single = radial_power_flow(case, p[[0]], q[[0]])
    assert single.all_converged is True and single.converged.tolist() == [True]
    capped = radial_power_flow(case, p[[0]], q[[0]], max_iter=1, tol_pu=1e-14)
    assert capped.all_converged is False and capped.converged.tolist() == [False]


def test_malformed_input_is_still_refused_by_the_public_flow():
    case = load_case("case33bw")
    p, q = _loads(case, 1, seed=1)
    bad = p.copy()
    bad[0, 5] = np.nan
    with pytest.raises(ValueError, match="p_mw"):
        radial_power_flow(case, bad, q)
    with pytest.raises(ValueError, match="slack_vm_pu"):
        radial_power_flow(case, p, q, slack_vm_pu=-1.0)
    with pytest.raises(ValueError, match="v_init"):
        radial_power_flow(case, p, q, v_init=np.ones((2, case.n_bus), dtype=complex))


def test_a_non_finite_load_is_named_by_the_unchecked_flow_too():
    case = load_case("case33bw")
    p, q = _loads(case, 2, seed=2)
    q[1, 7] = np.inf
    head = np.ones(2, dtype=np.complex128)
    with pytest.raises(ValueError, match=r"q_mvar\[1, 7\] is inf"):
        solve_flow(case, p, q, head)
