"""An RLlib-trained multi-agent policy behind PowerZoo's policy interface:
``act(obs_dict) -> action_dict``.

:class:`RLlibPolicy` holds the RLModules of an RLlib PPO run (new API stack), which agent uses which
module, and the fixed affine maps of the env it trained on. Like
:class:`powerzoo.rl.mappo.policy.MAPPOPolicy` it talks to envs in **physical units**
(``make_env(task, split)``, the env of the baselines table and of
:func:`powerzoo.benchmarks.evaluate`): observations go through the training env's normalisation
(``normalize=True``), and the module's deterministic action ``a`` (the Gaussian mean) becomes
``mid + half * clip(a, -1, 1)`` per component of bounded action boxes, exactly what RLlib's
action unsquashing and the normalised env do together.

Importing this module imports Ray and torch (``pip install "powerzoo[ray]"``).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.envs.rllib_env import PowerZooRLlibEnv

try:
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError('RLlib support needs Ray: pip install "powerzoo[ray]"') from err

__all__ = ["RLlibPolicy", "MODULES_DIR"]

MODULES_DIR = Path("learner_group") / "learner" / "rl_module"
"""Where ``Algorithm.save()`` puts the trained RLModules inside a checkpoint folder."""
_ENV_PREFIX = "powerzoo/"


def _task_from_config(env_config: Mapping[str, Any], env: Any, task: str | None) -> str:
    """The task a run trained on: ``task`` if given (checked),
    else its env_config or registered env name."""
    known = env_config.get("task")
    if known is None and isinstance(env, str) and env.startswith(_ENV_PREFIX):
        known = env[len(_ENV_PREFIX) :]
    if task is not None and known is not None and task != known:
        raise ValueError(f"the checkpoint trained on {known!r}, not {task!r}")
    if task is None and known is None:
        raise ValueError("the checkpoint does not name its task; pass task=...")
    return str(task if task is not None else known)


class RLlibPolicy:
    """RLlib RLModules acting for every agent of a multi-agent task (deterministic: Gaussian means).

    Build it with :meth:`from_checkpoint` (an ``Algorithm.save()`` folder) or :meth:`from_algorithm`
    (a live algorithm). ``act`` takes ``{agent: obs[d]}`` (or a batch ``{agent: obs[N, d]}``) in
    physical units and returns ``{agent: action[a]}`` (or ``[N, a]``) in physical units.

    Args:
        modules: ``{module id: RLModule}`` (torch).
        agent_to_module: ``{agent: module id}``, every agent of the task.
        env_config: the ``env_config`` the modules trained with (task, normalize, obs_mode, ...).
        meta: free-form facts (checkpoint path, ...).
    """

    def __init__(
        self,
        modules: Mapping[str, Any],
        agent_to_module: Mapping[str, str],
        env_config: Mapping[str, Any],
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.modules = dict(modules)
        self.agent_to_module = dict(agent_to_module)
        self.env_config = dict(env_config)
        self.meta = dict(meta or {})
        self.name = "rllib_ppo"
        unknown = set(self.agent_to_module.values()) - set(self.modules)
        if unknown:
            raise ValueError(
                f"agents map to modules {sorted(unknown)} that are not among {sorted(self.modules)}"
            )
        probe = PowerZooRLlibEnv(
            {**self.env_config, "seed": None}
        )  # the training env's spaces and scalers
        self.task_id = probe.task_spec.task_id
        self.agents = list(probe.possible_agents)
        missing = set(self.agents) - set(self.agent_to_module)
        if missing:
            raise ValueError(f"{self.task_id}: no module for agents {sorted(missing)}")
        self.obs_scaler = probe.core.obs_scaler
        low, high = probe.task_spec.action.bounds()
        n, d = len(self.agents), probe.task_spec.agent_action_dim
        low, high = (
            np.asarray(low, np.float64).reshape(n, d),
            np.asarray(high, np.float64).reshape(n, d),
        )
        bounded = np.isfinite(low) & np.isfinite(high)
        self._bounded = bounded
        self._act_mid = np.where(bounded, (high + low) / 2.0, 0.0)
        self._act_half = np.where(bounded, (high - low) / 2.0, 1.0)
        self._groups: dict[str, list[int]] = {}
        for i, agent in enumerate(self.agents):
            self._groups.setdefault(self.agent_to_module[agent], []).append(i)
        for module in self.modules.values():
            if hasattr(module, "eval"):
                module.eval()

    # ---- building --------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, path: str | Path, task: str | None = None) -> RLlibPolicy:
        """The policy of an RLlib checkpoint folder (``Algorithm.save()`` output, e.g. one made from
        :func:`ppo_config`).

        ``task`` checks (or, for a run whose env_config does not name it, sets) the task.

        Args:
            path: The checkpoint folder.
            task: The task name expected (``None``: the checkpoint's).

        Returns:
            The policy.
        """
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"RLlib checkpoint folder {path} not found")
        ctor_file, module_dir = path / "class_and_ctor_args.pkl", path / MODULES_DIR
        if not ctor_file.is_file() or not module_dir.is_dir():
            raise FileNotFoundError(
                f"{path} is not an RLlib Algorithm checkpoint (no class_and_ctor_args.pkl "
                f"or {MODULES_DIR})"
            )
        with open(ctor_file, "rb") as fh:
            ctor = pickle.load(fh)
        config = ctor["ctor_args_and_kwargs"][0][0]  # the AlgorithmConfig's state dict
        multi = RLModule.from_checkpoint(module_dir)
        return cls._from_parts(
            config, lambda mid: multi[mid], list(multi.keys()), task, {"checkpoint": str(path)}
        )

    @classmethod
    def from_algorithm(cls, algo: Any, task: str | None = None) -> RLlibPolicy:
        """The policy of a live RLlib ``Algorithm`` (``algo.get_module``:
        the sampling modules, which later training changes).

        Args:
            algo: A built RLlib ``Algorithm``.
            task: The task name expected (``None``: the algorithm's env_config's).

        Returns:
            The policy.
        """
        config = algo.config.get_state()
        return cls._from_parts(config, algo.get_module, sorted(algo.config.policies), task, {})

    @classmethod
    def _from_parts(
        cls,
        config: Mapping[str, Any],
        get_module: Callable[[str], Any],
        module_ids: list[str],
        task: str | None,
        meta: dict[str, Any],
    ) -> RLlibPolicy:
        env_config = dict(config.get("env_config") or {})
        env_config["task"] = _task_from_config(env_config, config.get("env"), task)
        probe = PowerZooRLlibEnv({**env_config, "seed": None})
        mapping_fn = config.get("policy_mapping_fn")
        if len(module_ids) == 1:
            mapping = dict.fromkeys(probe.possible_agents, module_ids[0])
        elif callable(mapping_fn):
            mapping = {a: str(mapping_fn(a, None)) for a in probe.possible_agents}
        else:
            raise ValueError(f"cannot tell which of the modules {module_ids} each agent uses")
        modules = {mid: get_module(mid) for mid in set(mapping.values())}
        return cls(modules, mapping, env_config, {**meta, "modules": sorted(modules)})

    # ---- acting ----------------------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Nothing to seed: the policy acts deterministically.

        Args:
            seed: Ignored.
        """
        return None

    def reset(self) -> None:
        """Nothing to forget between episodes."""
        return None

    def module_actions(self, unit_obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The modules' deterministic actions (RLlib's [-1, 1]
        units) for observations as the training env gives them.

        Args:
            unit_obs: ``{agent: obs}`` in the training env's units.

        Returns:
            ``{agent: action}`` in [-1, 1].
        """
        out: dict[str, np.ndarray] = {}
        for module_id, index in self._groups.items():
            module = self.modules[module_id]
            agents = [self.agents[i] for i in index]
            x = np.stack(
                [np.asarray(unit_obs[a], np.float32) for a in agents], axis=-2
            )  # [..., n, d]
            flat = torch.from_numpy(np.ascontiguousarray(x.reshape(-1, x.shape[-1])))
            with torch.no_grad():
                logits = module.forward_inference({"obs": flat})["action_dist_inputs"]
                dist = module.get_inference_action_dist_cls().from_logits(logits).to_deterministic()
                action = dist.sample().cpu().numpy()
            action = action.reshape(*x.shape[:-1], -1)
            for j, a in enumerate(agents):
                out[a] = action[..., j, :]
        return out

    def act(self, obs: Mapping[str, Any], info: Any = None) -> dict[str, np.ndarray]:
        """Physical actions of every agent for physical observations (module docstring).

        Args:
            obs: ``{agent: obs[d]}`` or ``{agent: obs[N, d]}``, physical units.
            info: Ignored.

        Returns:
            ``{agent: action}``, physical units.
        """
        missing = set(self.agents) - set(obs)
        if missing:
            raise ValueError(
                f"RLlibPolicy acts for {self.agents}; observations lack {sorted(missing)}"
            )
        unit = (
            obs
            if self.obs_scaler is None
            else {a: self.obs_scaler.to_unit(np.asarray(obs[a])) for a in self.agents}
        )
        actions = self.module_actions(unit)
        out: dict[str, np.ndarray] = {}
        for i, agent in enumerate(self.agents):
            a = np.asarray(actions[agent], np.float64)
            scaled = self._act_mid[i] + self._act_half[i] * np.clip(a, -1.0, 1.0)
            out[agent] = np.where(self._bounded[i], scaled, a)
        return out
