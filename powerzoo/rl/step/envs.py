"""The environments a step trainer steps: the agent's training ``VecEnv``, a separate evaluation
one, and what sits inside them (the first sub-env's constraint-cost names).

A plain Gymnasium env is attached to the SB3 model the way ``model.set_env`` does it (``Monitor`` +
``DummyVecEnv``), unless the model was built on that very env, whose ``VecEnv`` is then reused.
"""

from __future__ import annotations

from typing import Any

from powerzoo.envs.introspect import constraint_names_of

__all__ = ["attach_train_env", "wrap_eval_env", "cost_names"]


def attach_train_env(agent: Any, env: Any) -> Any:
    """The ``VecEnv`` that trains ``agent`` on ``env`` (a Gymnasium env or a ``VecEnv``).

    Raises:
        ValueError: the number of sub-envs differs from the one ``agent`` was built for.
    """
    from stable_baselines3.common.vec_env import VecEnv

    current = agent.get_env()
    if isinstance(env, VecEnv):
        if env is not current:
            if env.num_envs != agent.n_envs:
                raise ValueError(
                    f"env has {env.num_envs} sub-envs but the agent was built for {agent.n_envs}; "
                    "build the agent on an env with the same number of sub-envs"
                )
            agent.set_env(env, force_reset=True)
        return env
    if current is not None and _holds_env(current, env):
        return current
    if agent.n_envs != 1:
        raise ValueError(
            f"a single Gymnasium env was given but the agent was built for {agent.n_envs} envs"
        )
    agent.set_env(env, force_reset=True)  # Monitor + DummyVecEnv
    attached = agent.get_env()
    assert attached is not None
    return attached


def wrap_eval_env(agent: Any, eval_env: Any) -> Any:
    """``eval_env`` as a ``VecEnv`` (a ``DummyVecEnv`` around a Gymnasium env), checked against
    ``agent``'s observation and action spaces."""
    from stable_baselines3.common.utils import check_for_correct_spaces
    from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

    venv = eval_env if isinstance(eval_env, VecEnv) else DummyVecEnv([lambda e=eval_env: e])
    check_for_correct_spaces(venv, agent.observation_space, agent.action_space)
    return venv


def cost_names(venv: Any, n_costs: int) -> tuple[str, ...]:
    """Names of the ``n_costs`` constraint costs of ``venv``'s first sub-env; their indices
    (``"0"``, ``"1"``, ...) when it does not name them (or runs in another process)."""
    base = _base_vec_env(venv)
    envs = getattr(base, "envs", None)
    first = (
        envs[0] if envs else getattr(base, "env", None)
    )  # DummyVecEnv's first env, or the native batch
    try:
        names = tuple(str(n) for n in constraint_names_of(first)) if first is not None else ()
    except TypeError:  # not a PowerZoo env and no constraint_names() of its own
        names = ()
    return names if len(names) == n_costs else tuple(str(i) for i in range(n_costs))


def _base_vec_env(venv: Any) -> Any:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return venv


def _holds_env(venv: Any, env: Any) -> bool:
    """Whether ``venv`` is a one-env ``DummyVecEnv`` (possibly wrapped) around ``env`` (possibly
    wrapped)."""
    import gymnasium as gym

    envs = getattr(_base_vec_env(venv), "envs", None)
    if not envs or len(envs) != 1:
        return False
    candidate = envs[0]
    for _ in range(64):
        if candidate is env:
            return True
        if not isinstance(candidate, gym.Wrapper):
            return False
        candidate = candidate.env
    return False
