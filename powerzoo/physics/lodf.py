"""Line outage distribution factors (LODF): branch flows after the outage of one branch, from the
flows of the intact network, under the DC model.

The outage of branch ``k`` (from bus ``i`` to bus ``j``) is the intact network with a transfer of
``Delta`` MW injected at ``i`` and withdrawn at ``j`` chosen so that branch ``k`` carries exactly
``Delta`` (then nothing crosses the rest of the network through ``k``)::

    T[l, k]   = flow on branch l per MW transferred from i to j     (the transfer's PTDF column)
    Delta     = f_k / (1 - T[k, k])
    f'_l      = f_l + LODF[l, k] f_k,    LODF[l, k] = T[l, k] / (1 - T[k, k]),   LODF[k, k] = -1

(Wood & Wollenberg, *Power Generation, Operation and Control*, the linear sensitivity factors).
The argument holds with phase shifters (their constant flows are in ``f``). ``T[k, k] = 1``
means the branch is the only path between its ends: its outage splits the network, the factor
is undefined and :func:`lodf_matrix` gives NaN (:func:`islanding_outages`).
``T`` comes from the DC power flow of the unit transfers (:func:`transfer_flows`), dense or
sparse as :func:`~powerzoo.physics.dc_power_flow.dc_power_flow` chooses, so no dense
``n_branch x n_branch`` matrix is formed for the outages that are not asked for.

:func:`worst_outages` ranks the single-branch outages by the overload they leave on a set of
operating points, the screening of an operator's N-1 contingency analysis.
"""

from __future__ import annotations

import numpy as np

from powerzoo.physics.dc_power_flow import dc_power_flow, phase_shift_flow_mw
from powerzoo.physics.network import NetworkCase

__all__ = [
    "ISLANDING_TOL",
    "islanding_outages",
    "lodf_matrix",
    "post_outage_flows",
    "transfer_flows",
    "worst_outages",
]

ISLANDING_TOL = 1e-6  # 1 - T[k, k] below this: the outage of k splits the network


def _branches(case: NetworkCase, branches: np.ndarray | None) -> np.ndarray:
    out = np.arange(case.n_branch) if branches is None else np.asarray(branches, dtype=np.int64)
    if out.ndim != 1 or (out.size and (out.min() < 0 or out.max() >= case.n_branch)):
        raise ValueError(f"branches must be positions 0..{case.n_branch - 1}")
    return out


def transfer_flows(case: NetworkCase, branches: np.ndarray | None = None) -> np.ndarray:
    """Flow on every branch per MW injected at the from bus and withdrawn at the to bus of each
    of ``branches`` (default: all): ``T`` ``[n_branch, k]`` [MW/MW] (module docstring).

    Args:
        case: The transmission case (one connected network with ``branches`` in service).
        branches: Positions of the branches whose transfers to form.

    Returns:
        ``T[l, j]``, the flow on branch ``l`` per MW of the transfer of ``branches[j]``.
    """
    k = _branches(case, branches)
    injection = np.zeros((k.size, case.n_bus))
    rows = np.arange(k.size)
    injection[rows, case.branch_from_bus[k]] += 1.0
    injection[rows, case.branch_to_bus[k]] -= 1.0
    flows = dc_power_flow(case, injection) - phase_shift_flow_mw(case)
    return np.ascontiguousarray(flows.T)


def lodf_matrix(case: NetworkCase, outaged: np.ndarray | None = None) -> np.ndarray:
    """Line outage distribution factors ``[n_branch, k]``: the change of flow on each branch per
    MW that branch ``outaged[j]`` carried before its outage; ``-1`` on the outaged branch
    itself, NaN columns for outages that split the network.

    Args:
        case: The transmission case.
        outaged: Positions of the outaged branches (default: all), each in service.

    Returns:
        ``LODF[l, j]`` [MW/MW].
    """
    k = _branches(case, outaged)
    if not case.branch_in_service[k].all():
        raise ValueError("an outaged branch must be in service")
    transfer = transfer_flows(case, k)
    own = transfer[k, np.arange(k.size)]
    denominator = 1.0 - own
    islanding = np.abs(denominator) < ISLANDING_TOL
    lodf = transfer / np.where(islanding, 1.0, denominator)
    lodf[k, np.arange(k.size)] = -1.0
    lodf[:, islanding] = np.nan
    return lodf


def islanding_outages(case: NetworkCase, branches: np.ndarray | None = None) -> np.ndarray:
    """Whether the outage of each of ``branches`` (default: all) splits the network: bool
    ``[k]`` (out-of-service branches: False)."""
    k = _branches(case, branches)
    out = np.zeros(k.size, dtype=bool)
    on = case.branch_in_service[k]
    if on.any():
        own = transfer_flows(case, k[on])[k[on], np.arange(int(on.sum()))]
        out[on] = np.abs(1.0 - own) < ISLANDING_TOL
    return out


def post_outage_flows(
    case: NetworkCase,
    flow_mw: np.ndarray,
    outaged: np.ndarray,
    lodf: np.ndarray | None = None,
) -> np.ndarray:
    """Branch flows after each single outage of ``outaged``, from the intact flows.

    Args:
        case: The transmission case.
        flow_mw: Intact-network branch flows ``[..., n_branch]`` [MW].
        outaged: Positions of the outaged branches ``[k]``.
        lodf: :func:`lodf_matrix` of ``outaged`` if already formed.

    Returns:
        ``[..., k, n_branch]`` [MW]: row ``j`` the flows with ``outaged[j]`` out (0 on it; NaN
        where the outage splits the network).
    """
    k = _branches(case, outaged)
    factors = lodf_matrix(case, k) if lodf is None else np.asarray(lodf)
    flow = np.asarray(flow_mw, dtype=float)
    if flow.shape[-1] != case.n_branch:
        raise ValueError(f"flow_mw last dim {flow.shape[-1]} != n_branch {case.n_branch}")
    before = flow[..., k]  # [..., k]
    return flow[..., None, :] + before[..., :, None] * factors.T


def worst_outages(
    case: NetworkCase,
    flow_mw: np.ndarray,
    n: int = 10,
    candidates: np.ndarray | None = None,
    rating_scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` single-branch outages that leave the most overload over the operating points
    ``flow_mw`` (N-1 screening).

    Each in-service candidate whose outage keeps the network whole is scored by the overload it
    leaves, ``sum over points and branches of max(|f'| - rating_scale x rating, 0)`` [MW], ties
    (no overload) broken by the highest post-outage loading ``|f'| / rating``.

    Args:
        case: The transmission case (finite ratings are the ones checked).
        flow_mw: Intact flows ``[n_branch]`` or ``[B, n_branch]`` [MW].
        n: How many outages to return (fewer if fewer qualify).
        candidates: Positions of the branches that may go out (default: every in-service one).
        rating_scale: Post-contingency limit as a multiple of the rating (an emergency rating).

    Returns:
        ``(outaged [m], overload_mw [m])``: positions, worst first, and their overload scores.
    """
    flow = np.atleast_2d(np.asarray(flow_mw, dtype=float))
    k = _branches(case, candidates)
    k = k[case.branch_in_service[k]]
    k = k[~islanding_outages(case, k)]
    if k.size == 0 or n < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    limited = case.limited_branches
    limit = np.maximum(rating_scale * case.branch_rate_a_mw[limited], 1e-9)
    score = np.zeros(k.size)
    loading = np.zeros(k.size)
    lodf = lodf_matrix(case, k)
    for start in range(0, k.size, 64):  # [B, 64, n_limited] at a time
        part = slice(start, start + 64)
        after = np.abs(post_outage_flows(case, flow, k[part], lodf[:, part]))[..., limited]
        score[part] = np.maximum(after - limit, 0.0).sum(axis=(0, 2))
        loading[part] = (after / limit).max(axis=(0, 2), initial=0.0)
    order = np.lexsort((-loading, -score))[:n]
    return k[order], score[order]
