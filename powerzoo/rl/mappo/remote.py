"""Batched rollouts on Ray actors for the native multi-agent trainer (``rollout_workers > 0``).

Off by default. With ``algorithm_kwargs: {rollout_workers: K}`` the trainer's ``n_envs`` envs
are split into ``K`` contiguous blocks (the first ``n_envs % K`` blocks one env larger); each
block lives in one Ray actor (:class:`RolloutWorker`, one CPU) as a native multi-agent vector
env with that many copies, next to a copy of the actor and critic networks. One iteration is
one call per actor: the learner puts its weights in the object store once, sends each actor its
rows of the action noise, and gets back a *whole* rollout (``n_steps x rows`` arrays, the
finished episodes, the values after the last step for the GAE bootstrap). The learner joins the
blocks and runs the usual GAE and PPO update (:class:`RemoteCollector`, same interface as
:class:`~powerzoo.rl.mappo.collector.Collector`).

**Same rollouts as in-process collection, for any K.** Three things make block ``[lo, hi)`` of
a K-actor run step exactly like rows ``lo..hi-1`` of one in-process vector env of ``n_envs``:

* *env randomness*: the in-process runner draws start days (and any task noise) for all rows
  from one generator. Every actor holds that same generator (same seed) behind
  :class:`RowSlicedGenerator`, which draws for all ``n_envs`` rows and keeps its own, so every
  actor's generator stays in the state of the in-process one and each env gets the same days;
* *action noise*: the learner draws the Gaussian noise of every step and group from the global
  torch generator, in the order in-process sampling uses it (step by step, group by group), and
  actors form ``mean + std * noise``: bit-identical samples, and the learner's torch stream
  (mini-batch shuffles) is left where in-process collection leaves it;
* *order*: blocks are joined along the env axis and finished episodes sorted by (step, env),
  so statistics and the multiplier step of ``-L`` see the same numbers in the same order.

Exact equality holds on CPU (``device="cpu"``) for tasks whose random draws have the batch as
their leading ``size`` axis and scalar parameters (every current task: only start days and
``ev_v2g`` trips use the runner's generator); networks are evaluated row by row, so a block's
forward pass matches the full batch's (checked in ``tests/rl/test_mappo_remote.py``).

Checkpoints store the collector state in the in-process format (the blocks joined), so a run
resumes exactly with remote or in-process collection and any ``K``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from powerzoo.envs.introspect import inspect_env
from powerzoo.rl.mappo.algorithm import GroupLayout, MultiAgentPPO
from powerzoo.rl.mappo.buffer import GroupRollout, Rollout
from powerzoo.rl.mappo.collector import Collector, CollectResult, EpisodeBatch, require_reset
from powerzoo.rl.mappo.hparams import MAPPOParams
from powerzoo.rl.mappo.one_agent import make_native_env

__all__ = ["RemoteCollector", "RolloutWorker", "RowSlicedGenerator", "import_ray", "split_rows"]

RAY_HINT = 'pip install "powerzoo[ray]"'

# position of ``size`` among the positional arguments of numpy Generator methods
_SIZE_POSITION = {
    **dict.fromkeys(("random", "standard_normal", "standard_exponential"), 0),
    **dict.fromkeys(("exponential", "poisson", "choice", "standard_gamma"), 1),
    **dict.fromkeys(("integers", "uniform", "normal", "lognormal", "binomial", "gamma", "beta"), 2),
}


def import_ray() -> Any:
    """The ``ray`` module, or a one-line ``ImportError`` naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"remote rollouts (rollout_workers > 0) need Ray: {RAY_HINT}") from None
    return ray


def split_rows(n_envs: int, n_workers: int) -> list[tuple[int, int]]:
    """Contiguous blocks ``[(lo, hi), ...]`` of ``n_envs`` rows over ``n_workers`` (sizes differ
    by <= 1)."""
    if n_workers < 1 or n_workers > n_envs:
        raise ValueError(f"rollout_workers must be in [1, n_envs={n_envs}], got {n_workers}")
    base, extra = divmod(n_envs, n_workers)
    bounds, lo = [], 0
    for k in range(n_workers):
        hi = lo + base + (1 if k < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


class RowSlicedGenerator:
    """A numpy ``Generator`` as rows ``[lo, lo + n)`` of a batch of ``total`` rows see it.

    A draw whose ``size`` leads with ``n`` is drawn for ``total`` rows and sliced, so the
    underlying generator advances exactly as the full batch's would; other draws pass through.
    """

    def __init__(self, generator: np.random.Generator, total: int, lo: int, n: int) -> None:
        self.generator, self.total, self.lo, self.n = generator, int(total), int(lo), int(n)

    @property
    def bit_generator(self) -> Any:
        return self.generator.bit_generator

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.generator, name)
        if name not in _SIZE_POSITION or self.total == self.n:
            return method
        pos = _SIZE_POSITION[name]

        def draw(*args: Any, **kwargs: Any) -> Any:
            args_list = list(args)
            if "size" in kwargs:
                size = kwargs["size"]
            elif len(args_list) > pos:
                size = args_list[pos]
            else:
                return method(*args, **kwargs)
            shape = () if size is None else ((int(size),) if np.isscalar(size) else tuple(size))
            if not shape or shape[0] != self.n:
                return method(*args, **kwargs)
            full = (self.total, *shape[1:])
            if "size" in kwargs:
                kwargs["size"] = full
            else:
                args_list[pos] = full
            return method(*args_list, **kwargs)[self.lo : self.lo + self.n]

        return draw


class _NoisePolicy:
    """The worker's learner, acting with the learner's noise; with ``pad``, on the full batch's
    shape.

    Small matrix products give slightly different bits for a row depending on the batch size
    (MKL picks kernels by shape), so with ``pad`` the block's rows are placed at their place in an
    ``n_total``-row batch (zeros elsewhere) before every network call, and cut out after it.
    """

    def __init__(self, learner: MultiAgentPPO, n_total: int, lo: int, n: int, pad: bool) -> None:
        self._learner = learner
        self.n_total, self.lo, self.n = int(n_total), int(lo), int(n)
        self.pad = bool(pad) and n != n_total
        self._noise: Mapping[str, np.ndarray] = {}
        self._t = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._learner, name)

    def start(self, noise: Mapping[str, np.ndarray]) -> None:
        self._noise, self._t = noise, 0

    def _in(self, x: np.ndarray) -> np.ndarray:
        if not self.pad:
            return x
        out = np.zeros((self.n_total, *np.shape(x)[1:]), np.asarray(x).dtype)
        out[self.lo : self.lo + self.n] = x
        return out

    def _out(self, x: np.ndarray) -> np.ndarray:
        return x[self.lo : self.lo + self.n] if self.pad else x

    def values(
        self, obs: Mapping[str, np.ndarray], state: np.ndarray | None
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        values, costs = self._learner.values(
            {k: self._in(x) for k, x in obs.items()}, None if state is None else self._in(state)
        )
        return (
            {k: self._out(x) for k, x in values.items()},
            None if costs is None else {k: self._out(x) for k, x in costs.items()},
        )

    @torch.no_grad()
    def act(
        self, obs: Mapping[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        learner, actions, log_probs = self._learner, {}, {}
        for name in learner.layouts:
            dist = learner.actors[name].distribution(
                learner.actor_input(name, learner._tensor(self._in(obs[name])))
            )
            a = dist.mean + dist.stddev * torch.as_tensor(self._in(self._noise[name][self._t]))
            actions[name] = self._out(a.numpy())
            log_probs[name] = self._out(dist.log_prob(a).sum(-1).numpy())
        self._t += 1
        return actions, log_probs


class _BlockCollector(Collector):
    """A :class:`Collector` that remembers the step and global row of every finished episode."""

    def __init__(self, env: Any, learner: Any, row0: int) -> None:
        super().__init__(env, learner)
        self.row0, self._t = int(row0), 0
        self.keys: list[tuple[int, np.ndarray]] = []
        self.finished: list[tuple[np.ndarray, ...]] = []
        self.costs: np.ndarray | None = None

    def collect(self, n_steps: int) -> CollectResult:
        self._t, self.keys = 0, []
        return super().collect(n_steps)

    def _track(self, *step: Any) -> list[tuple[np.ndarray, ...]]:
        """:meth:`Collector._track` (same arguments, ``done`` last), remembering the step and the
        global rows of the episodes that end."""
        out = super()._track(*step)
        if out:
            self.keys.append((self._t, np.flatnonzero(step[-1]) + self.row0))
        self._t += 1
        return out

    def _episodes(self, finished: list[tuple[np.ndarray, ...]], costs: np.ndarray) -> EpisodeBatch:
        self.finished, self.costs = finished, costs
        return super()._episodes(finished, costs)


class RolloutWorker:
    """One block of envs and a copy of the networks; run as a Ray actor by :class:`RemoteCollector`.

    Args:
        task, split, env_kwargs: the training env
            (:func:`~powerzoo.rl.mappo.one_agent.make_native_env`).
        n_total: the run's ``n_envs``; ``lo``, ``n``: this block's first row and size.
        layouts, params, centralised, cost_names, thresholds: the learner's
            (see :class:`MultiAgentPPO`).
        torch_threads: torch threads of this worker (exact mode: the learner's; see
            :class:`_NoisePolicy`).
    """

    def __init__(
        self,
        task: str,
        split: str,
        env_kwargs: dict[str, Any],
        n_total: int,
        lo: int,
        n: int,
        layouts: Mapping[str, GroupLayout],
        params: dict[str, Any],
        centralised: bool,
        cost_names: tuple[str, ...],
        thresholds: list[float],
        torch_threads: int = 1,
    ) -> None:
        torch.set_num_threads(int(torch_threads))
        env = make_native_env(task, split, n, **env_kwargs)
        runner = inspect_env(env).runner

        def seed(value: int | None) -> None:  # every block holds the full batch's generator
            runner.rng = RowSlicedGenerator(np.random.default_rng(value), n_total, lo, n)

        runner.seed = seed
        local = MAPPOParams(
            **{**params, "device": "cpu", "rollout_workers": 0, "rollout_address": None}
        )
        self.learner = MultiAgentPPO(
            layouts, env.single_state_space.shape[0], local, centralised, cost_names, thresholds
        )
        self.policy = _NoisePolicy(
            self.learner, n_total, lo, n, bool(params.get("rollout_exact", True))
        )
        self.collector = _BlockCollector(env, self.policy, lo)

    def reset(self, seed: int) -> bool:
        self.collector.reset(seed)
        return True

    def collect(
        self, weights: dict[str, torch.Tensor], noise: dict[str, np.ndarray], n_steps: int
    ) -> dict[str, Any]:
        """``n_steps`` steps of this block with ``weights``; its rollout and raw episode records."""
        self.learner.load_state_dict(weights)
        self.policy.start(noise)
        rollout, _, last_v, last_cv = self.collector.collect(n_steps)
        c = self.collector
        return {
            "rollout": rollout,
            "last_values": last_v,
            "last_cost_values": last_cv,
            "costs": c.costs,
            "finished": c.finished,
            "keys": c.keys,
            "sizes": (len(c.agents), c.n_constraints),
        }

    def state(self) -> dict[str, Any]:
        return self.collector.state()

    def set_state(self, state: dict[str, Any]) -> bool:
        self.collector.set_state(state)
        return True


def _cat(parts: list[Any], axis: int) -> Any:
    return None if parts[0] is None else np.concatenate(parts, axis=axis)


def _join_state(states: list[Any]) -> Any:
    """Task states (dataclasses of [B, ...] arrays) of consecutive blocks as one batch."""
    return type(states[0])(
        **{
            f.name: np.concatenate([getattr(s, f.name) for s in states], axis=0)
            for f in dataclasses.fields(states[0])
        }
    )


def _slice_state(state: Any, lo: int, hi: int) -> Any:
    return type(state)(
        **{
            f.name: np.asarray(getattr(state, f.name))[lo:hi].copy()
            for f in dataclasses.fields(state)
        }
    )


class RemoteCollector:
    """Rollouts of ``n_envs`` envs on ``workers`` Ray actors (interface of :class:`Collector`).

    Joins the Ray session running in this process, else ``ray.init(address=address)`` (``None``:
    a new local session on this machine's cores; it is shut down by :meth:`close`).
    """

    def __init__(
        self,
        learner: MultiAgentPPO,
        task: str,
        split: str,
        env_kwargs: dict[str, Any],
        n_envs: int,
        workers: int,
        address: str | None = None,
    ) -> None:
        ray = import_ray()
        self.learner, self.n_envs = learner, int(n_envs)
        self.bounds = split_rows(self.n_envs, int(workers))
        self._ray, self._own_session = ray, False
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            self._own_session = True
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < workers and self._own_session and address is None:
            # a local session started here never grows: the surplus actors would wait forever
            ray.shutdown()
            raise ValueError(
                f"rollout_workers={workers} needs {workers} CPUs; this machine gives Ray "
                f"{cpus:g}: use rollout_workers <= {cpus:g}, or connect to a larger cluster "
                "(rollout_address)"
            )
        if cpus < workers:
            warnings.warn(
                f"{workers} rollout workers need {workers} CPUs; the Ray cluster has {cpus:g} "
                f"(actors wait until CPUs are free)",
                stacklevel=2,
            )
        worker_cls = ray.remote(num_cpus=1)(RolloutWorker)
        params = learner.params.to_dict()
        threads = torch.get_num_threads() if learner.params.rollout_exact else 1
        env_args = (task, split, dict(env_kwargs), self.n_envs)
        learner_args = (learner.layouts, params, learner.centralised, learner.cost_names)
        thresholds = learner.thresholds.tolist()
        self.workers = [
            worker_cls.remote(*env_args, lo, hi - lo, *learner_args, thresholds, threads)
            for lo, hi in self.bounds
        ]
        self.obs: Any = None

    def reset(self, seed: int | None) -> None:
        """Start every block on the full batch's seeded generator (``None``: one drawn here for
        all)."""
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._ray.get([w.reset.remote(seed) for w in self.workers])
        self.obs = True

    def _noise(self, n_steps: int) -> dict[str, np.ndarray]:
        """Action noise [T, N, n, act_dim] per group, in the order in-process sampling draws it."""
        layouts, dev = self.learner.layouts, self.learner.device
        draws: dict[str, list[torch.Tensor]] = {name: [] for name in layouts}
        for _ in range(n_steps):
            for name, g in layouts.items():
                draws[name].append(torch.randn((self.n_envs, g.n, g.act_dim), device=dev))
        return {name: torch.stack(d).cpu().numpy() for name, d in draws.items()}

    def collect(self, n_steps: int) -> CollectResult:
        """One whole rollout per actor, joined: the rollout, finished episodes, values after the
        last step."""
        require_reset(self.obs)
        ray = self._ray
        weights = ray.put({k: v.detach().cpu() for k, v in self.learner.state_dict().items()})
        noise = self._noise(n_steps)
        parts = ray.get(
            [
                w.collect.remote(
                    weights,
                    {g: np.ascontiguousarray(x[:, lo:hi]) for g, x in noise.items()},
                    n_steps,
                )
                for w, (lo, hi) in zip(self.workers, self.bounds, strict=True)
            ]
        )
        rollouts = [p["rollout"] for p in parts]
        groups = {
            name: GroupRollout(
                **{
                    f.name: _cat([getattr(r.groups[name], f.name) for r in rollouts], 1)
                    for f in dataclasses.fields(GroupRollout)
                }
            )
            for name in rollouts[0].groups
        }
        rollout = Rollout(
            groups,
            _cat([r.states for r in rollouts], 1),
            _cat([r.costs for r in rollouts], 1),
            _cat([r.terminated for r in rollouts], 1),
            _cat([r.truncated for r in rollouts], 1),
        )
        last_v = {name: _cat([p["last_values"][name] for p in parts], 0) for name in groups}
        last_cv = (
            None
            if parts[0]["last_cost_values"] is None
            else {name: _cat([p["last_cost_values"][name] for p in parts], 0) for name in groups}
        )
        return rollout, self._episodes(parts), last_v, last_cv

    @staticmethod
    def _episodes(parts: list[dict[str, Any]]) -> EpisodeBatch:
        """The blocks' finished episodes in the in-process order (by step, then env row)."""
        costs = np.concatenate([p["costs"] for p in parts], axis=1)
        chunks = [chunk for p in parts for chunk in p["finished"]]
        keys = [key for p in parts for key in p["keys"]]
        k = costs.shape[-1]
        step_costs = costs.reshape(-1, k).mean(axis=0)
        if not chunks:
            return EpisodeBatch.empty(*parts[0]["sizes"], step_costs)
        steps = np.concatenate([np.full(len(rows), t) for t, rows in keys])
        rows = np.concatenate([rows for _, rows in keys])
        order = np.lexsort((rows, steps))
        agent_returns, ep_costs, ep_selected, lengths = (
            np.concatenate(x)[order] for x in zip(*chunks, strict=True)
        )
        return EpisodeBatch(
            agent_returns.sum(axis=1), agent_returns, ep_costs, ep_selected, lengths, step_costs
        )

    # ---- exact continuation (in-process format) -------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The blocks' collector states joined into one in-process :meth:`Collector.state`."""
        states = self._ray.get([w.state.remote() for w in self.workers])
        rng = states[0]["runner_rng"]
        if any(s["runner_rng"] != rng for s in states):
            raise RuntimeError(
                "rollout workers' env generators diverged; cannot checkpoint exactly"
            )
        out = {
            "runner_state": _join_state([s["runner_state"] for s in states]),
            "runner_rng": rng,
            "obs": {
                a: np.concatenate([s["obs"][a] for s in states], axis=0) for a in states[0]["obs"]
            },
        }
        for key in ("ep_agent_returns", "ep_costs", "ep_selected", "ep_lengths"):
            out[key] = np.concatenate([s[key] for s in states], axis=0)
        return out

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from an in-process (or joined remote) collector state of ``n_envs`` rows."""
        calls = []
        for w, (lo, hi) in zip(self.workers, self.bounds, strict=True):
            block = {
                "runner_state": _slice_state(state["runner_state"], lo, hi),
                "runner_rng": state["runner_rng"],
                "obs": {a: np.asarray(v)[lo:hi].copy() for a, v in state["obs"].items()},
            }
            for key in ("ep_agent_returns", "ep_costs", "ep_selected", "ep_lengths"):
                block[key] = np.asarray(state[key])[lo:hi].copy()
            calls.append(w.set_state.remote(block))
        self._ray.get(calls)
        self.obs = True

    def close(self) -> None:
        """Stop the actors (and the Ray session if this collector started it)."""
        for w in self.workers:
            self._ray.kill(w)
        self.workers = []
        if self._own_session:
            self._ray.shutdown()
            self._own_session = False
