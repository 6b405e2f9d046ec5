"""What is behind a PowerZoo env: its task, spec, split, agents, cost names, scalers and runner.

Every layer above ``envs`` (evaluation, policies, datasets, trainers, the CLI) asks here instead of
poking at adapter attributes, so the adapters can change without breaking their readers.
:func:`inspect_env` reads any env that :func:`powerzoo.envs.make.make_env` returns: a Gymnasium
env with its wrappers, the native vector env, a PettingZoo / dict multi-agent env or the
multi-agent vector env.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = [
    "EnvFacts",
    "inspect_env",
    "task_of",
    "agents_of",
    "agent_spaces",
    "constraint_names_of",
    "env_metadata",
]


@dataclasses.dataclass(frozen=True)
class EnvFacts:
    """The PowerZoo facts of one env (see :func:`inspect_env`).

    ``obs_scaler`` / ``action_scaler`` are the :class:`~powerzoo.envs.scaling.AffineScaler`
    of ``normalize=True`` (``None`` in physical units); ``agents`` is ``None`` for single-agent
    envs; ``num_envs`` is ``None`` for an env that runs one episode at a time.
    """

    task: Any
    runner: Any
    agents: tuple[str, ...] | None
    obs_mode: str | None
    obs_scaler: Any
    action_scaler: Any
    num_envs: int | None

    @property
    def spec(self) -> Any:
        return self.task.spec

    @property
    def task_id(self) -> str:
        return self.task.spec.task_id

    @property
    def split(self) -> str:
        return self.task.split

    @property
    def constraint_names(self) -> tuple[str, ...]:
        return self.task.spec.constraint_names

    @property
    def normalized(self) -> bool:
        return self.action_scaler is not None


def _wrapper_chain(env: Any) -> list[Any]:
    """``env`` and every env it wraps (Gymnasium wrappers and vector wrappers), outermost first."""
    chain = [env]
    while hasattr(chain[-1], "env") and chain[-1].env is not chain[-1] and len(chain) < 64:
        chain.append(chain[-1].env)
    return chain


def inspect_env(env: Any) -> EnvFacts | None:
    """The facts of a PowerZoo env, or ``None`` if ``env`` is not one (any wrapper depth).

    Args:
        env: Any env, wrapped or not.

    Returns:
        The env's facts (task, spaces, agents, batch size), or ``None``.
    """
    chain = _wrapper_chain(env)
    for layer in chain:
        core = getattr(layer, "core", None)
        if core is not None and hasattr(core, "runner") and hasattr(core, "task"):
            num_envs = getattr(layer, "num_envs", None)
            return EnvFacts(
                core.task,
                core.runner,
                tuple(core.agents),
                core.obs_mode,
                core.obs_scaler,
                core.action_scaler,
                num_envs,
            )
    base = chain[-1]
    task, runner = getattr(base, "task", None), getattr(base, "runner", None)
    if task is None or runner is None or not hasattr(task, "spec"):
        return None
    obs_scaler = action_scaler = None
    for layer in chain:  # the single env's NormalizeWrapper, or the vector env's own scalers
        if getattr(layer, "action_scaler", None) is not None:
            obs_scaler, action_scaler = layer.obs_scaler, layer.action_scaler
            break
    return EnvFacts(
        task, runner, None, None, obs_scaler, action_scaler, getattr(base, "num_envs", None)
    )


def task_of(env: Any) -> Any:
    """The PowerZoo task behind ``env`` (through wrappers and adapters), or ``None``."""
    facts = inspect_env(env)
    return None if facts is None else facts.task


def agents_of(env: Any) -> list[str] | None:
    """Agent names of a multi-agent env; ``None`` for single-agent envs (or foreign multi-agent
    envs' agents)."""
    facts = inspect_env(env)
    if facts is not None:
        return None if facts.agents is None else list(facts.agents)
    agents = getattr(env, "possible_agents", None)
    return None if agents is None else list(agents)


def agent_spaces(space: Any, agents: Any = None) -> dict[str, Any] | None:
    """``{agent: space}`` from the ways multi-agent envs expose per-agent spaces; ``None`` for a
    single space (a ``Box``).

    ``space`` is what an env's ``action_space`` / ``observation_space`` attribute holds: a
    PettingZoo env's method ``space(agent)`` (its agents read from ``possible_agents`` of the
    env it is bound to, or from ``agents``), a ``gymnasium.spaces.Dict`` keyed by agent (the dict
    env's), or a mapping ``{agent: space}``. The order is the env's agent order.
    """
    import gymnasium as gym

    if isinstance(space, gym.spaces.Dict):
        return dict(space.spaces)
    if isinstance(space, gym.Space):
        return None
    if isinstance(space, dict):
        return dict(space)
    if callable(space):
        if agents is None:
            agents = getattr(getattr(space, "__self__", None), "possible_agents", None)
        if agents is None:
            raise TypeError(
                f"cannot tell the agents of {space!r}: expected a PettingZoo env's own "
                "action_space / observation_space method (env.action_space), or a "
                "gymnasium.spaces.Dict / dict {agent: space}"
            )
        return {agent: space(agent) for agent in agents}
    raise TypeError(
        f"expected a gymnasium space, a PettingZoo env's space method or {{agent: space}}, "
        f"got {type(space).__name__}"
    )


def constraint_names_of(env: Any, n_costs: int | None = None) -> tuple[str, ...]:
    """Names of ``info["constraint_costs"]`` entries.

    A foreign env may name them with its own ``constraint_names()`` method; otherwise they are
    ``cost_<i>`` for its ``n_costs`` costs.
    """
    facts = inspect_env(env)
    if facts is not None:
        return facts.constraint_names
    for layer in _wrapper_chain(env):
        names_fn = getattr(layer, "constraint_names", None)
        if callable(names_fn):
            names = tuple(names_fn())
            if n_costs is None or len(names) == n_costs:
                return names
    if n_costs is None:
        raise TypeError(f"{env!r} is not a PowerZoo env; pass n_costs to name its costs")
    return tuple(f"cost_{i}" for i in range(n_costs))


def env_metadata(env: Any) -> dict[str, Any]:
    """What can be said about ``env`` without stepping it: ``task``, ``split`` (``None`` if
    unknown)."""
    facts = inspect_env(env)
    return {
        "task": None if facts is None else facts.task_id,
        "split": None if facts is None else facts.split,
    }
