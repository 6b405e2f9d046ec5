"""A multi-agent task as an RLlib ``MultiAgentEnv`` (RLlib's new API stack, Ray 2.60).

Nothing in :mod:`powerzoo.envs` imports this module at import time: ``make_env(task,
framework="rllib")`` imports it inside the call, and RLlib builds it from a registered name
(:func:`powerzoo.integrations.rllib.register_rllib_envs`) or from the class with an ``env_config``.

Episodes: every agent acts at every step; the step that ends the episode returns every agent's
final observation with ``terminateds["__all__"]`` / ``truncateds["__all__"]`` set, and the next call
must be ``reset()`` (RLlib's vector env resets it). Rewards are Python floats times
``reward_scale`` (learning only; infos keep the task's numbers); infos hold the numeric keys of the
dict env's per-agent infos (costs, reward terms, the agent's own ``action_applied``, ...).

Seeds. RLlib's env runner ``w`` builds its ``K`` sub-envs one after the other with the *same*
``EnvContext`` (``vector_index`` is 0 for all of them) and, when ``config.seed`` is set, resets
them once with ``config.seed + w + k``, so neighbouring runners overlap. Each env therefore
numbers itself: ``sub_index = vector_index + (sub-envs built from this EnvContext before it)``,
and every seed ``s`` it is given (``env_config["seed"]`` at construction, or ``reset(seed=s)``) is
turned into the seed of its generator by::

    stream_seed(s, w, k) = s                                              if (w, k) == (0, 0)
                         = SeedSequence(s, spawn_key=(w, k)).generate_state(1, uint64)[0]  otherwise

so the first sub-env of the local runner (and ``make_env(..., framework="rllib")``) follows the
same stream as the PettingZoo env with seed ``s``, and sub-envs with different ``(w, k)`` draw
from independent streams even when RLlib hands them equal seeds. The seeds actually used are in
:attr:`PowerZooRLlibEnv.seed_history`. Evaluation runners reuse the training runners' indices:
give their ``env_config`` another ``seed`` if they must not repeat the training streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from powerzoo.envs.multi_agent import MultiAgentCore, _TaskMetadata
from powerzoo.envs.runner import start_day_option
from powerzoo.tasks.registry import get_task_class, make_task

try:
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError('RLlib support needs Ray: pip install "powerzoo[ray]"') from err

__all__ = ["PowerZooRLlibEnv", "ENV_CONFIG_KEYS", "stream_seed"]

ENV_CONFIG_KEYS: tuple[str, ...] = (
    "task",
    "split",
    "normalize",
    "seed",
    "obs_mode",
    "reward",
    "reward_scale",
    "task_kwargs",
)
"""``env_config`` keys the env reads; any other key is a task parameter (like ``make_env``'s
``**task_kwargs``)."""

_SUB_ENV_COUNT = (
    "_powerzoo_sub_envs"  # attribute set on RLlib's EnvContext: sub-envs built from it so far
)


def stream_seed(seed: int, worker_index: int, sub_index: int) -> int:
    """Seed of the generator of sub-env ``sub_index`` of env runner ``worker_index`` given
    ``seed`` (module doc)."""
    seed, worker_index, sub_index = int(seed), int(worker_index), int(sub_index)
    if seed < 0 or worker_index < 0 or sub_index < 0:
        raise ValueError(
            "seed, worker_index and sub_index must be >= 0, "
            f"got {seed}, {worker_index}, {sub_index}"
        )
    if worker_index == 0 and sub_index == 0:
        return seed
    sequence = np.random.SeedSequence(seed, spawn_key=(worker_index, sub_index))
    return int(sequence.generate_state(1, np.uint64)[0])


def _numeric(value: Any) -> bool:
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def _sub_env_identity(config: Any) -> tuple[int, int]:
    """``(worker_index, sub_index)`` of the env being built from ``config`` (an EnvContext or a
    dict)."""
    worker = int(getattr(config, "worker_index", 0) or 0)
    vector = int(getattr(config, "vector_index", 0) or 0)
    if not hasattr(config, "worker_index"):  # a plain dict: a standalone env
        return worker, vector
    built = int(getattr(config, _SUB_ENV_COUNT, 0))
    setattr(
        config, _SUB_ENV_COUNT, built + 1
    )  # the next sub-env of this runner gets the next index
    return worker, vector + built


class PowerZooRLlibEnv(_TaskMetadata, MultiAgentEnv):
    """A multi-agent PowerZoo task as an RLlib ``MultiAgentEnv`` (one episode at a time).

    Args:
        config: RLlib's ``env_config`` (an ``EnvContext``) or a dict: ``task`` (required),
            ``split`` (``"train"``), ``normalize`` (``False``: observations and actions in
            physical units), ``seed`` (``None``: OS entropy), ``obs_mode``, ``reward`` (override,
            as in ``make_env``), ``reward_scale`` (factor on the rewards RLlib sees, default 1.0),
            ``task_kwargs`` (dict); other keys are task parameters too.
        task: the task name when ``config`` has none (the creator of a registered
            ``"powerzoo/<task>"`` env passes it; ``config`` stays RLlib's own ``EnvContext``).

    Attributes:
        sub_env_id: ``(worker_index, sub_index)`` of this env (module doc).
        seed_history: every seed its generator was given, in order (after :func:`stream_seed`).
    """

    metadata = {"render_modes": []}

    def __init__(self, config: Mapping[str, Any] | None = None, *, task: str | None = None) -> None:
        config = {} if config is None else config
        if not isinstance(config, Mapping):
            raise TypeError(f"env_config must be a mapping, got {type(config).__name__}")
        if task is not None and config.get("task", task) != task:
            raise ValueError(f"env_config names task {config['task']!r} but the env is {task!r}")
        if task is None and "task" not in config:
            raise ValueError("env_config needs a 'task' (a registered multi-agent task name)")
        name = str(task if task is not None else config["task"])
        task_kwargs = dict(config.get("task_kwargs") or {})
        task_kwargs.update({k: v for k, v in config.items() if k not in ENV_CONFIG_KEYS})
        spec = get_task_class(name).make_spec(**task_kwargs)
        if spec.agent_mode != "multi":
            raise ValueError(
                f"{name} is a single-agent task; RLlib takes its Gymnasium env directly "
                f"(make_env({name!r}) or gymnasium.make)"
            )
        self.reward_scale = float(config.get("reward_scale", 1.0))
        if not np.isfinite(self.reward_scale) or self.reward_scale <= 0:
            raise ValueError(
                f"reward_scale must be a positive number, got {config.get('reward_scale')!r}"
            )
        spec.observation_spec(config.get("obs_mode"))  # validates obs_mode
        task = make_task(name, str(config.get("split", "train")), **task_kwargs)
        self.core = MultiAgentCore(
            task,
            1,
            config.get("obs_mode"),
            bool(config.get("normalize", False)),
            config.get("reward"),
        )
        self.task_spec = task.spec
        self.render_mode: str | None = None
        self.possible_agents = list(self.core.agents)
        self.agents = list(self.core.agents)
        self.observation_spaces = dict(self.core.observation_spaces)
        self.action_spaces = dict(self.core.action_spaces)
        self.observation_space = gym.spaces.Dict(self.observation_spaces)
        self.action_space = gym.spaces.Dict(self.action_spaces)
        n_state = self.core.n_agents * self.core.obs_spec.dim
        self.state_space = gym.spaces.Box(-np.inf, np.inf, shape=(n_state,), dtype=np.float32)
        super().__init__()
        self.sub_env_id = _sub_env_identity(config)
        self.seed_history: list[int | None] = []
        self._done = True
        seed = config.get("seed")
        if seed is not None:
            self._seed_streams(int(seed))

    def _seed_streams(self, seed: int | None) -> None:
        """Seed the task's generator and the action spaces from ``seed`` (None: OS entropy)."""
        derived = None if seed is None else stream_seed(seed, *self.sub_env_id)
        self.core.runner.seed(derived)
        self.seed_history.append(derived)
        if derived is not None:
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed((derived + i) % 2**63)

    def get_observation_space(self, agent_id: str) -> gym.Space:
        return self.observation_spaces[agent_id]

    def get_action_space(self, agent_id: str) -> gym.Space:
        return self.action_spaces[agent_id]

    def _obs_dict(self) -> dict[str, np.ndarray]:
        obs = np.array(self.core.observe()[0], dtype=np.float32)  # a copy: RLlib keeps references
        return dict(zip(self.possible_agents, obs, strict=True))

    def _infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {
            a: {k: v for k, v in row.items() if _numeric(v)}
            for a, row in self.core.agent_infos(info).items()
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode (``options={"day_id": k}`` picks the start day); ``seed`` goes
        through :func:`stream_seed`."""
        if seed is not None or self.core.runner.state is None:
            self._seed_streams(seed)
        self.core.runner.reset(start_day_option(options))
        info = self.core.runner.reset_info()
        self._done = False
        return self._obs_dict(), self._infos(info)

    def step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """One step of every agent; ``"__all__"`` in the done dicts; final observations at the
        end."""
        if self._done:
            raise RuntimeError("episode is over (or not started); call reset()")
        _, rewards, terminated, truncated, info = self.core.step(action_dict)
        term, trunc = bool(terminated.item(0)), bool(truncated.item(0))
        self._done = term or trunc
        scaled = (rewards[0] * self.reward_scale).tolist()
        terms = dict.fromkeys(self.possible_agents, term)
        truncs = dict.fromkeys(self.possible_agents, trunc)
        terms["__all__"], truncs["__all__"] = term, trunc
        return (
            self._obs_dict(),
            dict(zip(self.possible_agents, scaled, strict=True)),
            terms,
            truncs,
            self._infos(info),
        )

    def state(self) -> np.ndarray:
        """Global state [n_agents * obs_dim] for centralised critics: every agent's observation,
        agent-major."""
        return np.array(self.core.global_state()[0], dtype=np.float32)
