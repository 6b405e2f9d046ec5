"""Baseline policies behind one interface: ``act(obs, info) -> action`` and ``reset()``.

Rule-based and oracle policies compute physical actions from the task; when the env they act
in is normalised (``make_env(..., normalize=True)``) they read its scalers and convert, so the
same policy object works on raw and normalised envs. They also act in a multi-agent env
(``make_env(task, framework="auto")`` or ``"pettingzoo"``): ``act(obs_dict, info_dict)`` returns
``{agent: action}``, the task's joint action split agent-major.

Policies may also define ``seed(seed)``: :func:`seed_policy` calls it when it exists, so that
evaluation and dataset collection can reproduce an episode from its seed alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from powerzoo.benchmarks.naive import naive_action, table_baselines
from powerzoo.benchmarks.sb3_policy import SB3Policy
from powerzoo.envs.introspect import EnvFacts, agent_spaces, inspect_env
from powerzoo.envs.wrappers import NormalizeWrapper

__all__ = [
    "Policy",
    "RandomPolicy",
    "RuleBasedPolicy",
    "OraclePolicy",
    "IdlePolicy",
    "idle_tasks",
    "NaivePolicy",
    "table_baselines",
    "SB3Policy",
    "seed_policy",
    "find_normalizer",
    "fill_plan_gaps",
    "BASELINE_POLICIES",
    "make_baseline_policy",
]

BASELINE_POLICIES = ("random", "rule_based", "oracle", "idle")
"""Names of the baseline policies (a task lists the ones it defines in ``spec.baselines``;
``idle`` only where doing nothing is a policy, :class:`IdlePolicy`). The ``naive`` baseline of
the baselines table and the task card (:class:`NaivePolicy`) is defined per task by
:data:`~powerzoo.benchmarks.naive.NAIVE_BASELINES` instead."""


class Policy(Protocol):
    """What :func:`powerzoo.benchmarks.evaluation.rollout` needs from a policy."""

    def reset(self) -> None:
        """Forget the last episode (called before each episode)."""
        ...

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The action for one step.

        Args:
            obs: The env's observation (an array, or a dict per agent).
            info: The env's info dict of the last ``reset`` or ``step``.

        Returns:
            The action the env's ``step`` takes (an array, or a dict per agent).
        """
        ...


def seed_policy(policy: Any, seed: int | None) -> None:
    """Seed ``policy``'s own randomness with ``seed``
    if it has a ``seed`` method (else do nothing)."""
    seed_fn = getattr(policy, "seed", None)
    if seed is not None and callable(seed_fn):
        seed_fn(int(seed))


def _is_env(value: Any) -> bool:
    """True for an env object (Gymnasium, PettingZoo, a wrapper): not a space, a mapping of
    spaces or a space method, but something that has an ``action_space``."""
    return (
        not isinstance(value, gym.Space | Mapping)
        and not callable(value)
        and hasattr(value, "action_space")
    )


def _is_uniform_box(space: gym.Space) -> bool:
    """True for a float Box bounded on every side, where ``sample()`` is one uniform draw."""
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype.kind == "f"
        and bool(np.all(space.bounded_below & space.bounded_above))
    )


class RandomPolicy:
    """Uniform samples from ``action_space`` (Box, Dict of Boxes, ...); ``seed`` seeds the space.

    ``action_space`` may also be a PettingZoo env's ``action_space`` method
    (``RandomPolicy(env.action_space)`` for ``make_env(task, framework="pettingzoo")``): the
    policy then samples ``{agent: action}`` from the ``Dict`` of every agent's space, exactly as
    it does for the dict env (``framework="auto"``) with the same seed.

    For a bounded float Box the samples are drawn ahead in blocks with one generator call; the
    values are exactly those that successive ``action_space.sample()`` calls would return, as long
    as nothing else draws from the space's generator in between (re-seeding the space is noticed
    and starts a new block). Blocks start at ``first_block`` samples after a (re)seed and double
    up to ``block_bytes``, so re-seeding every episode does not pay for a large block each time.

    Args:
        action_space: A Gymnasium space, a PettingZoo env's ``action_space`` method, or the env
            itself (its ``action_space`` is used: ``RandomPolicy(env)`` is
            ``RandomPolicy(env.action_space)``, as ``RuleBasedPolicy(env)`` takes the env).
        seed: Seed of the space's generator (``None``: leave it as it is).
    """

    name = "random"
    block_bytes = 64 * 1024  # largest block of pre-drawn samples
    first_block = 64  # samples in the first block after a (re)seed

    def __init__(self, action_space: Any, seed: int | None = None) -> None:
        if _is_env(action_space):
            action_space = action_space.action_space
        per_agent = agent_spaces(action_space)
        if per_agent is not None and not isinstance(action_space, gym.spaces.Dict):
            action_space = gym.spaces.Dict(per_agent)
        self.action_space: gym.Space = action_space
        self._uniform_box = _is_uniform_box(action_space)
        self._block: np.ndarray | None = None
        self._block_rng: np.random.Generator | None = None
        self._next = 0
        self._block_len = self.first_block
        if seed is not None:
            self.seed(seed)

    def seed(self, seed: int) -> None:
        """Re-seed the action space's generator (drops any pre-drawn samples).

        Args:
            seed: The new seed.
        """
        self.action_space.seed(seed)
        self._block = None
        self._block_len = self.first_block

    def reset(self) -> None:
        """Nothing to forget between episodes."""
        return None

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """A uniform sample of the action space.

        Args:
            obs: Ignored.
            info: Ignored.

        Returns:
            One action (a dict per agent for a multi-agent space).
        """
        if not self._uniform_box:
            return self.action_space.sample()
        rng = self.action_space.np_random
        if self._block is None or self._next == len(self._block) or rng is not self._block_rng:
            space = self.action_space
            if rng is not self._block_rng:
                self._block_len = self.first_block
            n_samples = max(1, min(self._block_len, self.block_bytes // max(1, space.low.nbytes)))
            self._block_len *= 2
            draws = rng.uniform(space.low, space.high, size=(n_samples, *space.shape))
            self._block, self._block_rng, self._next = draws.astype(space.dtype), rng, 0
        action = self._block[self._next]
        self._next += 1
        return action


def find_normalizer(env: gym.Env) -> NormalizeWrapper | None:
    """The :class:`NormalizeWrapper` in ``env``'s wrapper chain, or ``None``."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, NormalizeWrapper):
            return env
        env = env.env
    return None


class _EnvView:
    """One PowerZoo env (one episode at a time) as the task's controllers see it.

    Controllers read physical observations of the task's default observation mode and return the
    physical joint action; the view converts both ways for a normalised env and, for a
    multi-agent env, splits the joint action agent-major into ``{agent: action}``. When a
    multi-agent env uses another observation mode (``obs_mode="local"``, ...) the default mode's
    observation is read from the env's state instead, i.e. the rule acts as a centralised
    controller.
    """

    def __init__(self, facts: EnvFacts) -> None:
        self.facts, self.task = facts, facts.task
        spec = self.task.spec
        self.agents = None if facts.agents is None else list(facts.agents)
        self._own_obs = facts.agents is None or facts.obs_mode in (None, spec.default_obs_mode)
        self._obs_dim = spec.observation.dim
        self._act_dim = spec.agent_action_dim

    def state(self) -> Any:
        return self.facts.runner.state

    def physical_obs(self, obs: Any) -> np.ndarray:
        """Observation batch of the default mode in physical units:
        [1, obs_dim] or [1, n_agents, obs_dim]."""
        if not self._own_obs:
            return np.asarray(self.task.observe(self.state()), dtype=np.float64)
        if self.agents is not None:
            obs = np.stack([np.asarray(obs[a], dtype=np.float64) for a in self.agents])
        obs = np.asarray(obs, dtype=np.float64)
        scaler = self.facts.obs_scaler
        if scaler is not None:
            obs = scaler.from_unit(obs)
        return (
            obs[None] if self.agents is not None else obs[None, : self._obs_dim]
        )  # forecast entries dropped

    def env_action(self, physical: np.ndarray) -> Any:
        """Physical joint action -> the env's action (unit range if normalised),
        float32; a dict per agent."""
        scaler = self.facts.action_scaler
        action = np.asarray(
            physical if scaler is None else scaler.to_unit(physical), dtype=np.float32
        )
        if self.agents is None:
            return action
        parts = action.reshape(len(self.agents), self._act_dim)
        return {a: parts[i] for i, a in enumerate(self.agents)}


def _env_view(env: Any, policy: str) -> _EnvView:
    """The view of ``env``; ``TypeError`` for anything but one PowerZoo env."""
    facts = inspect_env(env)
    if facts is None:
        raise TypeError(f"{policy} needs a PowerZoo env from make_env(...), got {env!r}")
    if facts.num_envs is not None:
        raise TypeError(f"{policy} acts on one env; build it with make_env(task) without num_envs")
    return _EnvView(facts)


class _TaskPolicy:
    """Shared plumbing: the task, and the conversions of a single- or multi-agent env.

    On a multi-agent env (``make_env(task, framework="auto")`` or ``"pettingzoo"``) ``act`` takes
    and returns dicts keyed by agent. Raises ``ValueError`` if the task does not list this
    policy among ``spec.baselines``.
    """

    name = ""

    def __init__(self, env: Any) -> None:
        self._view = _env_view(env, type(self).__name__)
        self.env = env
        self.task = self._view.task
        baselines = table_baselines(self.task.spec.task_id, self.task.spec)
        if self.name not in baselines:
            raise ValueError(
                f"{self.task.spec.task_id} defines no {self.name} baseline "
                f"(its baselines: {', '.join(baselines)}){self._where_defined()}"
            )

    def _where_defined(self) -> str:  # a hint after the error of a task without the baseline
        return ""

    def reset(self) -> None:
        return None


class RuleBasedPolicy(_TaskPolicy):
    """The task's rule-based controller (see each task's docstring).

    Args:
        env: The env it acts in (single- or multi-agent; physical or normalised units).
    """

    name = "rule_based"

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The rule's action for the current observation.

        Args:
            obs: The env's observation (a dict per agent on a multi-agent env).
            info: Ignored.

        Returns:
            The action in the env's units (a dict per agent on a multi-agent env).
        """
        physical = self.task.rule_based_action(self._view.physical_obs(obs))[0]
        return self._view.env_action(physical)


class TruthfulPolicy(_TaskPolicy):
    """Truthful bidding in a market task: every offer at
    true marginal cost (``task.truthful_action``)."""

    name = "truthful"

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        physical = self.task.truthful_action(self._view.physical_obs(obs))[0]
        return self._view.env_action(physical)


def idle_tasks() -> list[str]:
    """Names of the registered tasks with an idle action (``"idle"`` in ``spec.baselines``)."""
    from powerzoo.tasks import list_tasks, task_spec

    return [t for t in list_tasks() if "idle" in task_spec(t).baselines]


class IdlePolicy(_TaskPolicy):
    """The operator does nothing: the task's no-control action (``task.idle_action``, described
    in ``spec.idle_doc``) on every step, e.g. a battery at 0 MW.

    Only tasks where doing nothing is a policy define it (storage and flexibility tasks); a
    dispatch task, whose generators must be set, has none: ``ValueError`` naming the tasks
    that do.

    Args:
        env: The env it acts in (single- or multi-agent; physical or normalised units).
    """

    name = "idle"

    def _where_defined(self) -> str:
        return f"; tasks with an idle (no-control) action: {', '.join(idle_tasks())}"

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The idle action in the env's units (a dict per agent on a multi-agent env)."""
        physical = self.task.idle_action(self._view.physical_obs(obs))[0]
        return self._view.env_action(physical)


class NaivePolicy(_TaskPolicy):
    """The task's naive baseline (:data:`~powerzoo.benchmarks.naive.NAIVE_BASELINES`): its idle
    action, its rule, truthful bids or a network-blind dispatch, by task.

    Args:
        env: The env it acts in (single- or multi-agent; physical or normalised units).
    """

    name = "naive"

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The naive action in the env's units (a dict per agent on a multi-agent env)."""
        return self._view.env_action(naive_action(self.task, self._view.physical_obs(obs))[0])


def fill_plan_gaps(plan: np.ndarray, start: int = 0) -> tuple[np.ndarray, int]:
    """``plan`` [H, act_dim] with non-finite rows from ``start`` on interpolated linearly in time.

    Each gap is filled from the nearest finite rows before and after it (held constant at the
    ends). Returns the filled copy and the number of rows filled; ``RuntimeError`` if no row is
    finite.
    """
    plan = np.array(plan, dtype=np.float64)
    rows = np.arange(start, plan.shape[0])
    good = np.all(np.isfinite(plan[start:]), axis=1)
    if good.all():
        return plan, 0
    if not good.any():
        raise RuntimeError("the oracle plan has no finite step")
    bad = rows[~good]
    for j in range(plan.shape[1]):
        plan[bad, j] = np.interp(bad, rows[good], plan[rows[good], j])
    return plan, int(bad.size)


class OraclePolicy(_TaskPolicy):
    """Perfect-foresight optimum of the episode, planned at its first step (``task.oracle_plan``).

    If the plan has non-finite steps (the task's solver failed on them, e.g. HiGHS on a few
    DC-OPFs of ``opf_118``), they are interpolated from the neighbouring steps
    (:func:`fill_plan_gaps`) with a ``RuntimeWarning``; ``fallback_steps`` counts such steps
    since construction.

    Args:
        env: The env it acts in (single- or multi-agent; physical or normalised units).
    """

    name = "oracle"
    plan_method = "oracle_plan"  # the task's method giving the plan [B, H, act_dim]

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._plan: np.ndarray | None = None
        self.fallback_steps = 0

    def reset(self) -> None:
        """Drop the plan; the next ``act`` plans the new episode."""
        self._plan = None

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The plan's action for the current step (planned at the episode's first step).

        Args:
            obs: Ignored (the plan reads the env's state).
            info: Ignored.

        Returns:
            The action in the env's units (a dict per agent on a multi-agent env).
        """
        state = self._view.state()
        step = int(np.asarray(self.task.time_index(state))[0])
        if self._plan is None or step == 0:
            self._plan = self._make_plan(state, step)
        return self._view.env_action(self._plan[step])

    def _make_plan(self, state: Any, step: int) -> np.ndarray:
        plan, filled = fill_plan_gaps(getattr(self.task, self.plan_method)(state)[0], step)
        if filled:
            self.fallback_steps += filled
            warnings.warn(
                f"{self.task.spec.task_id}: oracle solver failed on {filled} step(s) of day "
                f"{int(self.task.episode_day(state)[0])}; interpolated from the neighbouring steps",
                RuntimeWarning,
                stacklevel=3,
            )
        return plan


class SeparatePolicy(OraclePolicy):
    """A coupled transmission-distribution task's separately optimised plans, planned at the
    episode's first step (``task.separate_plan``): transmission first, then the feeders at the
    resulting prices."""

    name = "separate"
    plan_method = "separate_plan"


class FlexIdlePolicy(OraclePolicy):
    """A coupled task's transmission optimum with the distribution's flexibility idle
    (``task.flex_idle_plan``), planned at the episode's first step."""

    name = "flex_idle"
    plan_method = "flex_idle_plan"


class MyopicPolicy(OraclePolicy):
    """A time-coupled dispatch task's step-by-step optimum without look-ahead
    (``task.myopic_plan``: each step's DC-OPF within its ramp range, energy spent as it comes),
    planned at the episode's first step."""

    name = "myopic"
    plan_method = "myopic_plan"


PLAN_POLICIES: dict[str, type[OraclePolicy]] = {
    "separate": SeparatePolicy,
    "flex_idle": FlexIdlePolicy,
    "myopic": MyopicPolicy,
}
"""Task-specific plan baselines (in a task's ``spec.baselines``, not :data:`BASELINE_POLICIES`):
name -> policy acting the task's plan method (``myopic``: ``opf_118_7d``)."""


def make_baseline_policy(name: str, env: Any, seed: int | None = 0) -> Policy:
    """Baseline ``name`` (one of :data:`BASELINE_POLICIES`) acting in ``env``.

    ``seed`` seeds the random policy's action space (``None``: leave it as it is).

    Args:
        name: ``"random"``, ``"rule_based"``, ``"oracle"``, ``"idle"``, ``"truthful"`` or
            ``"naive"``.
        env: The env the policy acts in.
        seed: Seed of the random policy's action space.

    Returns:
        The policy.
    """
    if name == "random":
        return RandomPolicy(env.action_space, seed=seed)
    if name == "rule_based":
        return RuleBasedPolicy(env)
    if name == "oracle":
        return OraclePolicy(env)
    if name == "idle":
        return IdlePolicy(env)
    if name == "truthful":  # market tasks only (in their spec.baselines, not BASELINE_POLICIES)
        return TruthfulPolicy(env)
    if name == "naive":  # per task: naive.NAIVE_BASELINES (the table's and the task card's)
        return NaivePolicy(env)
    if name in PLAN_POLICIES:  # the joint tasks' separate and flex_idle plans
        return PLAN_POLICIES[name](env)
    raise ValueError(f"unknown baseline policy {name!r}; valid: {', '.join(BASELINE_POLICIES)}")
