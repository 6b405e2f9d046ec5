"""A trained Stable-Baselines3 model behind the policy interface of
:mod:`powerzoo.benchmarks.policies` (which re-exports :class:`SB3Policy`)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SB3Policy", "predict_action", "predicts_directly"]

# policy -> how :func:`predict_action` acts for it (types and spaces do not change over a
# policy's life): ``predict`` itself, the policy's ``_predict``, or its Gaussian mean directly
_PREDICT, _POLICY_PREDICT, _GAUSSIAN_MEAN = 0, 1, 2
_ROUTE: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _route(model: Any) -> int:
    """How :func:`predict_action` acts for ``model``.

    ``_POLICY_PREDICT`` for an SB3 algorithm whose ``predict`` is SB3's own generic one on a
    ``Box`` observation space that is not an image (no recurrent state, no epsilon-greedy, no
    dict or image handling); ``_GAUSSIAN_MEAN`` when, in addition, its policy is SB3's
    actor-critic with a diagonal Gaussian (the mode is the actor's output, with no distribution
    object to build); ``_PREDICT`` otherwise.
    """
    policy = getattr(model, "policy", None)
    if policy is None:
        return _PREDICT
    try:
        known = _ROUTE.get(policy)
    except TypeError:  # not weak-referenceable: not a torch module
        return _PREDICT
    if known is not None:
        return known
    from gymnasium import spaces
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.distributions import DiagGaussianDistribution
    from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
    from stable_baselines3.common.preprocessing import is_image_space

    space = getattr(policy, "observation_space", None)
    route = _PREDICT
    if (
        isinstance(model, BaseAlgorithm)
        and isinstance(policy, BasePolicy)
        and type(model).predict is BaseAlgorithm.predict
        and type(policy).predict is BasePolicy.predict
        and type(policy).obs_to_tensor is BasePolicy.obs_to_tensor
        and isinstance(space, spaces.Box)
        and not is_image_space(space)
    ):
        route = _POLICY_PREDICT
        kind = type(policy)
        if (
            isinstance(policy, ActorCriticPolicy)
            and type(policy.action_dist) is DiagGaussianDistribution
            and not policy.squash_output
            and all(
                getattr(kind, name) is getattr(ActorCriticPolicy, name)
                for name in ("_predict", "get_distribution", "_get_action_dist_from_latent")
            )
        ):
            route = _GAUSSIAN_MEAN
    _ROUTE[policy] = route
    return route


def predicts_directly(model: Any) -> bool:
    """Whether :func:`predict_action` skips ``predict``'s wrapping for ``model`` (then the
    model keeps no recurrent state, so a caller holding one can drop it).

    Args:
        model: An SB3 algorithm (anything is accepted: ``False`` for what is not one).
    """
    return _route(model) != _PREDICT


def predict_action(model: Any, obs: Any, deterministic: bool = True) -> Any:
    """``model.predict(obs, deterministic=deterministic)[0]``, bit for bit, at about half its cost
    on the small MLP policies of PowerZoo's tasks.

    SB3's ``predict`` switches the policy to evaluation mode through every module, checks and
    copies the observation and, for a Gaussian policy, builds a ``torch.distributions`` object
    (with its argument checks) on each call. For a policy already in evaluation mode and a
    ``Box`` observation this runs the policy on the same tensor (the actor's mean, which is the
    mode, for a deterministic Gaussian actor-critic; the policy's ``_predict`` otherwise) and
    post-processes the action as ``predict`` does (squashed actions rescaled, others clipped to
    the action space, the batch axis removed for a single observation). Anything else
    (recurrent, dict or image observations, an algorithm with its own ``predict`` such as DQN's
    exploration, or an observation of the wrong shape, whose error ``predict`` raises) goes
    through ``predict``.

    Args:
        model: An SB3 algorithm (anything with ``predict`` is accepted).
        obs: One observation, or a batch of them along a leading axis.
        deterministic: Take the mode of the action distribution instead of a sample (a sample
            draws torch's global stream exactly as ``predict`` does).

    Returns:
        The action (``numpy`` array), shaped as ``predict`` shapes it.
    """
    route = _route(model)
    if route == _PREDICT:
        return model.predict(obs, deterministic=deterministic)[0]
    policy = model.policy
    shape = policy.observation_space.shape
    obs = np.asarray(obs)
    if obs.shape == shape:
        batched = False
    elif obs.shape[1:] == shape and obs.ndim == len(shape) + 1:
        batched = True
    else:
        return model.predict(obs, deterministic=deterministic)[0]
    import torch as th
    from gymnasium import spaces
    from stable_baselines3.common.policies import BaseModel

    if policy.training:
        policy.set_training_mode(False)
    obs_tensor = th.as_tensor(obs.reshape((-1, *shape)), device=policy.device)
    with th.no_grad():
        if route == _GAUSSIAN_MEAN and deterministic:
            features = BaseModel.extract_features(policy, obs_tensor, policy.pi_features_extractor)
            actions = policy.action_net(policy.mlp_extractor.forward_actor(features))
        else:
            actions = policy._predict(obs_tensor, deterministic=deterministic)
    action_space = policy.action_space
    actions = actions.cpu().numpy().reshape((-1, *action_space.shape))
    if isinstance(action_space, spaces.Box):
        if policy.squash_output:
            actions = policy.unscale_action(actions)
        else:
            actions = np.clip(actions, action_space.low, action_space.high)
    return actions if batched else actions.squeeze(axis=0)


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
        if predicts_directly(model):  # no recurrent state to carry
            return predict_action(model, obs, deterministic=self.deterministic)
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
