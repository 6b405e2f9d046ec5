"""A trained Stable-Baselines3 model behind the policy interface of
:mod:`powerzoo.benchmarks.policies` (which re-exports :class:`SB3Policy`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SB3Policy"]


class SB3Policy:
    """A trained Stable-Baselines3 model (or a dict ``{agent: model}``) behind the policy interface.

    ``act`` returns ``model.predict(obs, deterministic=...)``'s action; for a multi-agent dict env
    pass one model per agent and ``act`` returns ``{agent: action}``. Recurrent models keep their
    hidden state within an episode (cleared by ``reset``). The observations must be those the
    model was trained on (build the env with the same ``normalize=`` / wrappers).

    Args:
        model: A trained SB3 model, or ``{agent: model}`` for a multi-agent dict env.
        deterministic: Take the mode of the action distribution instead of a sample.
    """

    def __init__(self, model: Any, deterministic: bool = True) -> None:
        models = model.values() if isinstance(model, Mapping) else [model]
        if not all(callable(getattr(m, "predict", None)) for m in models):
            raise TypeError(
                "SB3Policy needs a model with .predict(obs, ...) (or a dict of them), "
                f"got {model!r}"
            )
        self.model = model
        self.deterministic = bool(deterministic)
        first = next(iter(model.values())) if isinstance(model, Mapping) else model
        self.name = f"sb3_{type(first).__name__.lower()}"
        self._states: dict[Any, Any] = {}

    def seed(self, seed: int) -> None:
        """Seed the models' sampling (only matters with ``deterministic=False``).

        Args:
            seed: Passed to each model's ``set_random_seed``.
        """
        if self.deterministic:
            return
        models = self.model.values() if isinstance(self.model, Mapping) else [self.model]
        for m in models:
            if callable(getattr(m, "set_random_seed", None)):
                m.set_random_seed(seed)

    def reset(self) -> None:
        """Clear the recurrent models' hidden state."""
        self._states = {}

    def _predict(self, key: Any, model: Any, obs: Any) -> Any:
        state = self._states.get(key)
        episode_start = np.asarray([state is None])
        action, self._states[key] = model.predict(
            obs, state=state, episode_start=episode_start, deterministic=self.deterministic
        )
        return action

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """The model's action for ``obs``.

        Args:
            obs: The env's observation (a dict per agent with a dict of models).
            info: Ignored.

        Returns:
            The action (a dict per agent with a dict of models).
        """
        if isinstance(self.model, Mapping):
            missing = set(obs) - set(self.model)
            if missing:
                raise ValueError(
                    f"SB3Policy has no model for agent(s) {sorted(missing)}; "
                    f"models: {sorted(self.model)}"
                )
            return {agent: self._predict(agent, self.model[agent], o) for agent, o in obs.items()}
        return self._predict(None, self.model, obs)
