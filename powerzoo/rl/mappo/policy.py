"""A trained multi-agent policy that runs without the trainer (and without torch):
``act(obs_dict)``.

:class:`MAPPOPolicy` holds each agent group's actor as numpy arrays (weights of a tanh MLP and the
Gaussian log standard deviation) plus the agents of each group and their action bounds. It acts
for a single env (``{agent: obs[d]}`` -> ``{agent: action[a]}``) or a batch
(``{agent: obs[N, d]}`` -> ``{agent: action[N, a]}``), so it plugs into
:func:`powerzoo.benchmarks.evaluation.evaluate` like the baselines. Saved as one ``.npz`` file.

A one-agent policy (``PPO-L`` on a single-agent task) acts on the single-agent Gymnasium env
directly: ``act(obs[d]) -> action[a]``.

It talks to envs in **physical units** (``make_env(task, split, framework="auto")``, the env of
the baselines table): when the agent trained on a normalised env, the policy carries the same
fixed affine maps (``obs_unit = (obs - mid) / half``; ``action = mid + half * clip(a, -1, 1)``)
and applies them itself, so its actions are exactly those the normalised env would have taken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from powerzoo.fileio import atomic_save

__all__ = ["GroupActor", "MAPPOPolicy", "POLICY_FILE"]

POLICY_FILE = "policy.npz"


class GroupActor:
    """One group's actor in numpy: ``layers`` [(W [in, out], b [out]), ...] with tanh between them.

    ``act_mid`` / ``act_half`` [n, act_dim] map [-1, 1] actions to physical ones;
    ``obs_mid`` / ``obs_half`` [obs_dim] (or ``None``) map physical observations to the network's.
    """

    def __init__(
        self,
        agents: Sequence[str],
        layers: Sequence[tuple[np.ndarray, np.ndarray]],
        log_std: np.ndarray,
        act_mid: np.ndarray,
        act_half: np.ndarray,
        obs_mid: np.ndarray | None = None,
        obs_half: np.ndarray | None = None,
    ) -> None:
        self.agents = list(agents)
        self.layers = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in layers]
        self.log_std = np.asarray(log_std, np.float32)
        self.act_mid, self.act_half = (
            np.asarray(act_mid, np.float64),
            np.asarray(act_half, np.float64),
        )
        self.obs_mid = None if obs_mid is None else np.asarray(obs_mid, np.float64)
        self.obs_half = None if obs_half is None else np.asarray(obs_half, np.float64)
        self.ids = np.eye(len(self.agents), dtype=np.float32)

    def mean(self, obs: np.ndarray) -> np.ndarray:
        """Action means in [-1, 1] units: physical ``obs`` [..., n, d] -> [..., n, act_dim]."""
        x = np.asarray(obs, np.float32)
        if self.obs_mid is not None:  # exactly what the normalised env computes
            x = ((x - self.obs_mid) / self.obs_half).astype(np.float32)
        if len(self.agents) > 1:
            x = np.concatenate(
                [x, np.broadcast_to(self.ids, (*x.shape[:-1], len(self.agents)))], axis=-1
            )
        for i, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if i < len(self.layers) - 1:
                x = np.tanh(x)
        return x

    def to_physical(self, unit: np.ndarray) -> np.ndarray:
        """[-1, 1] actions (clipped) -> physical actions (float64)."""
        return self.act_mid + self.act_half * np.asarray(np.clip(unit, -1.0, 1.0), np.float64)


class MAPPOPolicy:
    """Per-group actors behind the benchmark policy interface:
    ``act(obs, info=None) -> {agent: action}``.

    Args:
        groups: ``{group: GroupActor}``.
        deterministic: act with the Gaussian means (default) or sample (seed with :meth:`seed`).
        meta: free-form facts saved with the policy (task, algorithm, obs_mode, normalize, ...).
    """

    def __init__(
        self,
        groups: Mapping[str, GroupActor],
        deterministic: bool = True,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.groups = dict(groups)
        self.deterministic = bool(deterministic)
        self.meta = dict(meta or {})
        self.agents = [a for g in self.groups.values() for a in g.agents]
        self.name = str(self.meta.get("algorithm", "mappo")).lower()
        self._rng = np.random.default_rng(0)

    def seed(self, seed: int | None) -> None:
        """Seed the action noise (only used with ``deterministic=False``).

        Args:
            seed: Seed of the noise generator (``None``: fresh entropy).
        """
        self._rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """Nothing to forget between episodes (the actors are feed-forward)."""
        return None

    def with_mode(self, deterministic: bool) -> MAPPOPolicy:
        """The same actors acting deterministically or stochastically.

        Args:
            deterministic: Act with the Gaussian means (``True``) or sample.

        Returns:
            A new policy sharing the actors.
        """
        return MAPPOPolicy(self.groups, deterministic, self.meta)

    def act(self, obs: Any, info: Any = None) -> Any:
        """Actions of every agent: ``{agent: obs[d]}`` -> ``{agent: action[a]}`` (or batched
        ``[N, ...]``).

        A one-agent policy (``PPO-L`` on a single-agent task) also takes the single-agent env's
        observation array ``obs[d]`` (or ``[N, d]``) and returns the action array ``[a]``
        (``[N, a]``).

        Args:
            obs: ``{agent: obs}`` (physical units, as the env gives them), or an array for a
                one-agent policy.
            info: Ignored.

        Returns:
            ``{agent: action}`` in physical units, or an array for a one-agent policy.
        """
        if not isinstance(obs, Mapping):
            if len(self.agents) != 1:
                raise ValueError(
                    f"MAPPOPolicy acts for {self.agents}: give observations as a dict "
                    f"{{agent: obs}}, got {type(obs).__name__}"
                )
            (agent,) = self.agents
            return self.act({agent: obs}, info)[agent]
        missing = set(self.agents) - set(obs)
        if missing:
            raise ValueError(
                f"MAPPOPolicy acts for {self.agents}; observations lack {sorted(missing)}"
            )
        out: dict[str, np.ndarray] = {}
        for actor in self.groups.values():
            x = np.stack(
                [np.asarray(obs[a], np.float32) for a in actor.agents], axis=-2
            )  # [..., n, d]
            mean = actor.mean(x)
            if not self.deterministic:
                mean = mean + np.exp(actor.log_std) * self._rng.standard_normal(mean.shape).astype(
                    np.float32
                )
            action = actor.to_physical(mean)
            for i, a in enumerate(actor.agents):
                out[a] = action[..., i, :]
        return out

    # ---- files ----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the policy as one ``.npz`` file (atomically); returns the path.

        Args:
            path: The ``.npz`` file to write.

        Returns:
            The path written.
        """
        path = Path(path)
        arrays: dict[str, np.ndarray] = {}
        groups_meta = {}
        for name, g in self.groups.items():
            groups_meta[name] = {"agents": g.agents, "n_layers": len(g.layers)}
            for i, (w, b) in enumerate(g.layers):
                arrays[f"{name}/w{i}"], arrays[f"{name}/b{i}"] = w, b
            arrays[f"{name}/log_std"] = g.log_std
            arrays[f"{name}/act_mid"], arrays[f"{name}/act_half"] = g.act_mid, g.act_half
            if g.obs_mid is not None:
                arrays[f"{name}/obs_mid"], arrays[f"{name}/obs_half"] = g.obs_mid, g.obs_half
        arrays["__meta__"] = np.frombuffer(
            json.dumps({"groups": groups_meta, "meta": self.meta}).encode(), np.uint8
        )

        def write(target: Path) -> None:
            with open(target, "wb") as fh:
                np.savez(fh, **arrays)

        return atomic_save(path, write)

    @classmethod
    def load(cls, path: str | Path, deterministic: bool = True) -> MAPPOPolicy:
        """Read a policy written by :meth:`save` (numpy only; no torch, no trainer).

        Args:
            path: A ``.npz`` file written by :meth:`save`.
            deterministic: Act with the Gaussian means (``True``) or sample.

        Returns:
            The policy.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"policy file {path} not found")
        with np.load(path) as data:
            info = json.loads(bytes(data["__meta__"]).decode())
            groups = {}
            for name, g in info["groups"].items():
                layers = [
                    (data[f"{name}/w{i}"], data[f"{name}/b{i}"]) for i in range(g["n_layers"])
                ]
                scaled = f"{name}/obs_mid" in data.files
                groups[name] = GroupActor(
                    g["agents"],
                    layers,
                    data[f"{name}/log_std"],
                    data[f"{name}/act_mid"],
                    data[f"{name}/act_half"],
                    data[f"{name}/obs_mid"] if scaled else None,
                    data[f"{name}/obs_half"] if scaled else None,
                )
        return cls(groups, deterministic, info["meta"])
