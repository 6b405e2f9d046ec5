"""Market clearing: generator offer curves cleared by a DC-OPF with line limits, batched over ``B``.

Offer curves
------------
Unit ``g``'s range above ``Pmin`` is cut into ``K`` equal blocks (``K = n_blocks``) of
``w_g = (Pmax_g - Pmin_g) / K`` MW, with edges ``a_gk = Pmin_g + k w_g`` and ``b_gk = a_gk + w_g``.
The **true marginal cost** of block ``k`` is the average of the unit's marginal cost
``c1 + 2 c2 p`` over the block, ``mc_gk = c1_g + c2_g (a_gk + b_gk)`` [$/MWh], so a block cleared
in full costs exactly ``c1 w + c2 (b^2 - a^2)`` (for linear costs, as in case5, ``mc_gk = c1_g``).
A company shapes its offer with one **multiplicative markup per block**::

    offer price  pi_gk = (1 + m_gk) * mc_gk     [$/MWh],  m_gk > -1  (m = 0: truthful)

The offer curve is the step function of block prices over the block widths, and it is always
**non-decreasing** in quantity: ISO energy-offer rules (PJM, MISO, ERCOT, CAISO) accept only
monotonically non-decreasing offer curves. A unit's ``K`` markups are read as its ``K``
equal-width (price, quantity) pairs and stacked in order of price, as a market builds a supply
curve from price-quantity pairs: :meth:`MarketClearing.monotone_markup` sorts each unit's
markups, ``m'_g = sort(m_g)``, so block ``k`` (the ``k``-th cheapest quantity) gets the
``k``-th smallest markup. As ``mc_gk`` is non-decreasing in ``k`` (``c2 >= 0``) and
``1 + m' >= 0`` is too, the prices ``(1 + m'_gk) mc_gk`` are non-decreasing; the markups keep
their range, and an already non-decreasing offer is unchanged. With linear costs (``mc`` equal
over a unit's blocks, as in case5) the sorted curve clears exactly as the unsorted one did (the
LP takes a unit's cheapest blocks first either way, and the blocks are equally wide); with
quadratic costs (case14, case118) it decides which price goes with which block's cost.
``Pmin`` is must-run and is not offered; it is paid the LMP like the rest.

Clearing (one LP per env, PTDF form, lossless DC)::

    min  sum_gk pi_gk x_gk + rho sum_l (s+_l + s-_l) + VOLL (u + v)
    s.t. sum_gk x_gk + u - v = sum_i d_i - sum_g Pmin_g                          (dual: lambda)
         -F_l <= PTDF_l (C_g p - d) - s+_l + s-_l <= F_l,  p_g = Pmin_g + sum_k x_gk   (dual: mu_l)
         0 <= x_gk <= w_g,   s, u, v >= 0

``u`` (unserved load) and ``v`` (spilled generation) sit at the reference bus (zero PTDF
column, so they move no flow) and are priced at ``voll_per_mwh``; ``s+`` / ``s-`` relax the
flow limits at ``line_penalty_per_mwh`` (``None``: hard limits and no ``s`` columns). With soft
limits every row of a batch is feasible; with hard limits a row can be infeasible (its
outputs are NaN, ``status`` says so). Locational marginal prices are derivatives of the
optimal as-bid cost w.r.t. bus demand: ``lmp_i = lambda + sum_l mu_l PTDF_{l,i}`` from the LP
duals, as in :mod:`powerzoo.physics.dc_opf`. With all markups 0 and ``K = 1`` on a
linear-cost case the clearing *is* the DC-OPF of the true costs (case5 at 1,000 MW:
17,479.90 $/h, tests/physics/test_market_clearing.py).

How a batch is solved
---------------------
The ``B`` LPs are independent, so they are stacked into **block-diagonal LPs** of up to
:data:`CHUNK` envs (21 columns and 3 rows per env on case5 with soft limits) and each stack
goes to HiGHS's dual simplex in one call through highspy's low-level API: the matrix is built
once per stack size and kept; a call only changes the block costs (markups) and the row
bounds (loads). Every call starts cold (``clearSolver``, presolve off), so results never
depend on the previous step's basis: the same inputs give bit-identical outputs. (An env's
numbers may differ in the last bits, ~1e-13 MW, with the other envs stacked beside it.)

Measured on case5 (2-core CI-class machine, random markups and loads, ``K = 3``): a stack of 64
to 256 envs takes about 37 us per env (~27,000 clearings per second; the time per env grows
past ~100 envs, 48 us at 512, hence the chunks), against 0.2 to 0.5 ms for one LP on its own
(highspy's per-call overhead dominates): stacking is what makes the batched env fast. A warm
start from the previous basis gained < 5 % and would make results depend on history. A
merit-order path with a check for binding lines was rejected: a line binds in 56 % of the
steps of ``gencos_bidding``'s test split (truthful or random markups alike), so more than half
of the envs would fall back to the LP anyway, and the stacked LP clears them all in one call.

highspy is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerzoo.physics.dc_power_flow import dc_power_flow, gen_bus_matrix, ptdf_matrix
from powerzoo.physics.highs import new_highs
from powerzoo.physics.network import NetworkCase

__all__ = ["MarketClearing", "MarketResult", "clear_market", "VOLL_PER_MWH"]

VOLL_PER_MWH = 10_000.0  # value of lost load (and cost of spilled generation), $/MWh
CHUNK = 128  # envs per stacked LP (measured: ~37 us per env from 64 to 256 envs, 48 us at 512)
_DROP_TOL = 1e-10  # |PTDF * C_g| entries below this are dropped from the constraint matrix


@dataclass(frozen=True)
class MarketResult:
    """Cleared market of ``B`` envs (arrays lead with ``B``); infeasible rows are NaN."""

    gen_p_mw: np.ndarray  # [B, n_gen] dispatch (Pmin + cleared blocks)
    block_p_mw: np.ndarray  # [B, n_gen, K] cleared MW of each offer block
    offer_price_per_mwh: np.ndarray  # [B, n_gen, K] the offers cleared (non-decreasing in K)
    lmp_per_mwh: np.ndarray  # [B, n_bus] locational marginal prices
    lmp_energy_per_mwh: np.ndarray  # [B] balance dual (= LMP at the reference bus)
    branch_mu_per_mwh: np.ndarray  # [B, n_branch] flow-limit shadow prices (0 if not binding)
    branch_flow_mw: np.ndarray  # [B, n_branch] DC flows of the dispatch
    overload_mw: np.ndarray  # [B, n_branch] flow above rating (soft limits only; else 0)
    unserved_mw: np.ndarray  # [B] load not served (priced at VOLL)
    spilled_mw: np.ndarray  # [B] generation above load that had to be spilled (Pmin > load)
    offer_cost_per_h: np.ndarray  # [B] as-bid cost of the cleared blocks, sum pi x
    production_cost_per_h: np.ndarray  # [B] true cost c0 + c1 p + c2 p^2 of the dispatch
    status: np.ndarray  # [B] "optimal" or HiGHS's verdict for that row

    @property
    def success(self) -> bool:
        """True if every row cleared."""
        return bool(np.all(self.status == "optimal"))


class MarketClearing:
    """Batched offer-curve clearing on ``case`` (see the module docstring for the model).

    Args:
        case: the network (ratings, PTDF, units and their polynomial costs).
        n_blocks: offer blocks per unit (``K``), each with its own markup.
        line_limit_scale: multiplies every finite branch rating.
        line_penalty_per_mwh: price of flow above a rating (soft limits); ``None`` for hard limits.
        voll_per_mwh: price of unserved load and of spilled generation.
    """

    def __init__(
        self,
        case: NetworkCase,
        n_blocks: int = 1,
        line_limit_scale: float = 1.0,
        line_penalty_per_mwh: float | None = None,
        voll_per_mwh: float = VOLL_PER_MWH,
    ) -> None:
        if int(n_blocks) != n_blocks or n_blocks < 1:
            raise ValueError(f"n_blocks must be a positive integer, got {n_blocks!r}")
        if not line_limit_scale > 0:
            raise ValueError(f"line_limit_scale must be > 0, got {line_limit_scale!r}")
        if line_penalty_per_mwh is not None and not line_penalty_per_mwh >= 0:
            raise ValueError(
                f"line_penalty_per_mwh must be >= 0 or None, got {line_penalty_per_mwh!r}"
            )
        if not voll_per_mwh > 0:
            raise ValueError(f"voll_per_mwh must be > 0, got {voll_per_mwh!r}")
        if np.any(case.gen_c2_per_mw2h[case.gen_in_service] < 0):
            raise ValueError(f"{case.name}: negative quadratic cost (non-convex)")
        self.case = case
        self.n_blocks = k = int(n_blocks)
        self.soft = line_penalty_per_mwh is not None
        self.voll = float(voll_per_mwh)
        n_gen = case.n_gen
        pmin, pmax = case.gen_limits_mw
        self.pmin_mw = pmin
        width = (pmax - pmin) / k
        edges = pmin[:, None] + width[:, None] * np.arange(k + 1)  # [n_gen, K+1]
        self.block_edges_mw = edges
        self.block_mw = np.repeat(width[:, None], k, axis=1)  # [n_gen, K]
        on = case.gen_in_service
        c1 = np.where(on, case.gen_c1_per_mwh, 0.0)
        c2 = np.where(on, case.gen_c2_per_mw2h, 0.0)
        self.block_marginal_cost = c1[:, None] + c2[:, None] * (
            edges[:, :-1] + edges[:, 1:]
        )  # [n_gen, K]
        self._cost_coefficients = (float(np.sum(case.gen_c0_per_h[on])), c1, c2)
        self._gen_bus = gen_bus_matrix(case)

        ptdf = ptdf_matrix(case)
        limited = case.limited_branches
        self._limited = limited
        self._ptdf_lim = ptdf[limited]  # [n_lim, n_bus]
        a_gen = self._ptdf_lim @ gen_bus_matrix(case).T  # [n_lim, n_gen]
        a_gen[np.abs(a_gen) < _DROP_TOL] = 0.0
        self._f_max = case.branch_rate_a_mw[limited] * line_limit_scale
        self._pmin_flow = a_gen @ pmin  # [n_lim] flow of the must-run output
        n_lim = limited.size
        self._n_x = n_gen * k

        # ---- one env's LP: columns x (gen-major), [s+, s-], u, v; rows balance, flow
        n_slack = 2 * n_lim if self.soft else 0
        n_col = self._n_x + n_slack + 2
        a = np.zeros((1 + n_lim, n_col))
        a[0, : self._n_x] = 1.0
        a[0, -2], a[0, -1] = 1.0, -1.0  # u serves load, v spills generation
        a[1:, : self._n_x] = np.repeat(a_gen, k, axis=1) * on.repeat(k)[None, :]
        if self.soft:
            a[1:, self._n_x : self._n_x + n_lim] = -np.eye(n_lim)
            a[1:, self._n_x + n_lim : self._n_x + n_slack] = np.eye(n_lim)
        self._a_env = a
        self._col_cost_env = np.concatenate(
            [
                np.zeros(self._n_x),
                np.full(n_slack, line_penalty_per_mwh or 0.0),
                [self.voll, self.voll],
            ]
        )
        self._col_upper_env = np.concatenate(
            [np.where(on.repeat(k), self.block_mw.ravel(), 0.0), np.full(n_slack + 2, np.inf)]
        )
        self._models: dict[int, _BatchLP] = {}

    def __getstate__(self) -> dict:
        """Pickle without the HiGHS models (rebuilt on first use)."""
        return {key: value for key, value in self.__dict__.items() if key != "_models"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._models = {}

    # ---- offers -----------------------------------------------------------------------------
    def offer_prices(self, markup: np.ndarray) -> np.ndarray:
        """Offer prices ``(1 + m') * mc`` [$/MWh] ``[B, n_gen, K]``, non-decreasing over each
        unit's blocks, for markups ``[B, n_gen, K]`` (``[B, n_gen]`` applies one markup to every
        block of a unit); ``m'`` = :meth:`monotone_markup` (module docstring).

        Args:
            markup: Markups [B, n_gen, K] or [B, n_gen], fractions of marginal cost.

        Returns:
            Offer prices [B, n_gen, K], $/MWh.
        """
        return (1.0 + self.monotone_markup(markup)) * self.block_marginal_cost

    def monotone_markup(self, markup: np.ndarray) -> np.ndarray:
        """The markups ``[B, n_gen, K]`` (fraction of each block's true marginal cost) actually
        offered for ``markup`` (shapes as :meth:`offer_prices`): each unit's markups sorted in
        increasing order, so that its offer curve is non-decreasing (module docstring).

        Args:
            markup: Markups [B, n_gen, K] or [B, n_gen], fractions of marginal cost.

        Returns:
            Sorted markups [B, n_gen, K].
        """
        return np.sort(self._markup(markup, None), axis=2)

    def _markup(self, markup: np.ndarray, n_batch: int | None) -> np.ndarray:
        """Markups as ``[B, n_gen, K]``: from ``[B, n_gen, K]``, ``[B, n_gen]`` (one per unit) or
        ``[n_gen]``; a batch of 1 is broadcast to ``n_batch``."""
        m = np.asarray(markup, dtype=float)
        n_gen, k = self.case.n_gen, self.n_blocks
        if m.ndim == 1:
            m = m[None]
        if m.ndim == 2 and m.shape[1] == n_gen:
            m = np.repeat(m[:, :, None], k, axis=2)
        if m.ndim != 3 or m.shape[1:] != (n_gen, k):
            raise ValueError(
                f"markup must be [B, n_gen, n_blocks] = [B, {n_gen}, {k}], [B, {n_gen}] or "
                f"[{n_gen}], got shape {np.shape(markup)}"
            )
        if n_batch is not None and m.shape[0] != n_batch:
            if m.shape[0] != 1:
                raise ValueError(f"markup batch {m.shape[0]} != load batch {n_batch}")
            m = np.broadcast_to(m, (n_batch, n_gen, k))
        if not np.all(np.isfinite(m)):
            raise ValueError("markup contains NaN or inf")
        if np.any(m < -1.0):
            raise ValueError(f"markup must be >= -1 (offer price >= 0), got min {float(m.min())}")
        return m

    # ---- clearing ---------------------------------------------------------------------------
    def clear(self, load_mw: np.ndarray, markup: np.ndarray) -> MarketResult:
        """Clear the market for bus demand ``load_mw`` ``[B, n_bus]`` [MW] (negative = net
        injection, e.g. renewables) under ``markup`` (see :meth:`offer_prices`).

        Returns a :class:`MarketResult` with leading axis ``B`` (also for ``B = 1``).

        Args:
            load_mw: Bus demand [B, n_bus], MW.
            markup: Markups [B, n_gen, K] or [B, n_gen].

        Returns:
            Dispatch (MW), offers and LMPs ($/MWh), flows and overloads (MW), unserved load (MW).
        """
        load = np.asarray(load_mw, dtype=float)
        if load.ndim == 1:
            load = load[None]
        n_bus = self.case.n_bus
        if load.ndim != 2 or load.shape[1] != n_bus:
            raise ValueError(
                f"load_mw must be [B, n_bus] with n_bus={n_bus}, got shape {np.shape(load_mw)}"
            )
        if not np.all(np.isfinite(load)):
            raise ValueError("load_mw contains NaN or inf")
        n_batch = load.shape[0]
        # [B, n_gen, K], non-decreasing over each unit's blocks (ISO offer rules)
        prices = (1.0 + np.sort(self._markup(markup, n_batch), axis=2)) * self.block_marginal_cost
        net = load.sum(axis=1) - self.pmin_mw.sum()
        offset = load @ self._ptdf_lim.T - self._pmin_flow  # [B, n_lim]
        lo = np.concatenate([net[:, None], offset - self._f_max], axis=1)
        up = np.concatenate([net[:, None], offset + self._f_max], axis=1)
        status, x, y = self._solve(prices.reshape(n_batch, -1), lo, up)
        return self._result(load, prices, status, x, y)

    def _model(self, n_batch: int) -> _BatchLP:
        model = self._models.get(n_batch)
        if model is None:
            if len(self._models) >= 8:  # batch sizes seen by one env are few; drop old ones
                self._models.pop(next(iter(self._models)))
            model = self._models[n_batch] = _BatchLP(
                self._a_env, self._col_cost_env, self._col_upper_env, n_batch
            )
        return model

    def _solve(
        self, cost: np.ndarray, lo: np.ndarray, up: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(status [B], x [B, n_col], row_dual [B, n_row])``, NaN rows where infeasible."""
        n_batch = cost.shape[0]
        if n_batch > CHUNK:  # HiGHS's time per env grows with the stacked LP's size past ~100 envs
            parts = [
                self._solve(cost[i : i + CHUNK], lo[i : i + CHUNK], up[i : i + CHUNK])
                for i in range(0, n_batch, CHUNK)
            ]
            return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]
        text, x, y = self._model(n_batch)(self._n_x, cost, lo, up)
        if text == "optimal":
            return np.full(n_batch, "optimal", dtype=object), x, y  # str at the end
        if n_batch == 1:
            return np.array([text], dtype=object), np.full_like(x, np.nan), np.full_like(y, np.nan)
        # one infeasible row makes the stacked LP infeasible: find it row by row
        parts = [self._solve(cost[i : i + 1], lo[i : i + 1], up[i : i + 1]) for i in range(n_batch)]
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]

    def _result(
        self, load: np.ndarray, prices: np.ndarray, status: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> MarketResult:
        case, n_batch, n_lim = self.case, load.shape[0], self._limited.size
        # HiGHS meets bounds to its feasibility tolerance: clip the round-off (|err| < 1e-7 MW)
        blocks = np.minimum(np.maximum(x[:, : self._n_x].reshape(prices.shape), 0.0), self.block_mw)
        x = np.maximum(x, 0.0)
        gen_p = self.pmin_mw + blocks.sum(axis=2)
        mu = np.zeros((n_batch, case.n_branch))
        mu[:, self._limited] = y[:, 1:]
        lmp_energy = y[:, 0]
        lmp = (
            lmp_energy[:, None] + y[:, 1:] @ self._ptdf_lim
            if n_lim
            else np.repeat(lmp_energy[:, None], case.n_bus, 1)
        )
        unserved, spilled = x[:, -2], x[:, -1]
        injection = gen_p @ self._gen_bus - load
        injection[:, case.slack_bus] += unserved - spilled
        flow = dc_power_flow(case, injection)
        overload = np.zeros((n_batch, case.n_branch))
        if self.soft:
            overload[:, self._limited] = (
                x[:, self._n_x : self._n_x + n_lim]
                + x[:, self._n_x + n_lim : self._n_x + 2 * n_lim]
            )
        c0, c1, c2 = self._cost_coefficients
        return MarketResult(
            gen_p_mw=gen_p,
            block_p_mw=blocks,
            offer_price_per_mwh=prices,
            lmp_per_mwh=lmp,
            lmp_energy_per_mwh=lmp_energy,
            branch_mu_per_mwh=mu,
            branch_flow_mw=flow,
            overload_mw=overload,
            unserved_mw=unserved,
            spilled_mw=spilled,
            offer_cost_per_h=(blocks * prices).sum(axis=(1, 2)),
            production_cost_per_h=(gen_p * gen_p) @ c2 + gen_p @ c1 + c0,
            status=status.astype(str),
        )


class _BatchLP:
    """HiGHS holding the block-diagonal LP of ``n_batch`` copies of one env's LP.

    One env: ``a_env`` [n_row, n_col] (its non-zeros are the same in every copy), column costs
    (the first ``n_x`` change per call), column bounds ``[0, col_upper]``.
    """

    def __init__(
        self, a_env: np.ndarray, col_cost: np.ndarray, col_upper: np.ndarray, n_batch: int
    ) -> None:
        import highspy

        self._hs = highspy
        n_row, n_col = a_env.shape
        self.n_row, self.n_col, self.n_batch = n_row, n_col, n_batch
        inf = highspy.kHighsInf
        rows, cols = np.nonzero(a_env.T)  # sorted by column of a_env, then row
        nnz = rows.size
        env_start = np.searchsorted(rows, np.arange(n_col))  # first non-zero of each column
        batch = np.arange(n_batch)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_col * n_batch, n_row * n_batch
        lp.col_cost_ = np.tile(col_cost, n_batch)
        lp.col_lower_ = np.zeros(n_col * n_batch)
        lp.col_upper_ = np.tile(np.where(np.isinf(col_upper), inf, col_upper), n_batch)
        lp.row_lower_ = np.zeros(n_row * n_batch)
        lp.row_upper_ = np.zeros(n_row * n_batch)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        starts = (env_start[None, :] + nnz * batch[:, None]).ravel()
        lp.a_matrix_.start_ = np.append(starts, nnz * n_batch).astype(np.int32)
        lp.a_matrix_.index_ = (cols[None, :] + n_row * batch[:, None]).ravel().astype(np.int32)
        lp.a_matrix_.value_ = np.tile(a_env.T[rows, cols], n_batch)
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
        # tiny blocks: presolve costs more than it saves
        highs = new_highs(presolve="off")
        highs.passModel(lp)
        self.highs = highs
        self._x_cols: np.ndarray | None = None
        self._rows = np.arange(n_row * n_batch, dtype=np.int32)

    def __call__(
        self, n_x: int, cost: np.ndarray, lo: np.ndarray, up: np.ndarray
    ) -> tuple[str, np.ndarray, np.ndarray]:
        """Solve cold with block costs ``cost`` [B, n_x] and row bounds ``lo``/``up`` [B, n_row]."""
        if self._x_cols is None:
            cols = np.arange(n_x)[None, :] + self.n_col * np.arange(self.n_batch)[:, None]
            self._x_cols = cols.ravel().astype(np.int32)
        h = self.highs
        h.clearSolver()
        h.changeColsCost(
            self._x_cols.size, self._x_cols, np.ascontiguousarray(cost, dtype=float).ravel()
        )
        h.changeRowsBounds(self._rows.size, self._rows, lo.ravel(), up.ravel())
        h.run()
        status = h.getModelStatus()
        shape_x, shape_y = (self.n_batch, self.n_col), (self.n_batch, self.n_row)
        if status != self._hs.HighsModelStatus.kOptimal:
            return (
                h.modelStatusToString(status).lower(),
                np.full(shape_x, np.nan),
                np.full(shape_y, np.nan),
            )
        sol = h.getSolution()
        return (
            "optimal",
            np.asarray(sol.col_value).reshape(shape_x),
            np.asarray(sol.row_dual).reshape(shape_y),
        )


def clear_market(
    case: NetworkCase, load_mw: np.ndarray, markup: np.ndarray, **kwargs: float | int | None
) -> MarketResult:
    """One-off :meth:`MarketClearing.clear` (``kwargs`` go to :class:`MarketClearing`).

    Args:
        case: The transmission case.
        load_mw: Bus demand [B, n_bus], MW.
        markup: Markups [B, n_gen, K] or [B, n_gen].
        **kwargs: Options of :class:`MarketClearing`.

    Returns:
        The cleared market.
    """
    return MarketClearing(case, **kwargs).clear(load_mw, markup)  # type: ignore[arg-type]
