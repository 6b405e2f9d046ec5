"""Campaign files and their trials: the format, and the specs a campaign expands into.

A campaign file (YAML, read with ``yaml.safe_load``; nothing in it runs as code)::

    name: smoke                          # default: the file's stem
    tasks: [battery_arbitrage, marl_opf]
    seeds: [0, 1]                        # one trial per seed; also the evaluation seeds
    track: S                             # optional compute track (powerzoo.rl.tracks): S = 5
                                         # minutes of wall clock on one core, L = 10M env steps
                                         # or one hour; it replaces the budget's steps. A
                                         # setting's own `track:` overrides it.
    budget:                              # training budget of every trial
      total_timesteps: 8192              # env steps (or `episodes: N`)
      n_envs: 8
      per_task:                          # optional, per task: the same keys
        marl_opf: {total_timesteps: 24576, n_envs: 128}
    evaluation:
      split: test
      episodes: null                     # null: every day of the split; k: k days spread evenly;
                                         # {task: k | null}: per task (others: every day)
      baselines: [random, rule_based, oracle]
      model: best                        # best (val-selected; final when none) | final
      plots: true
      env_seeds: trial                   # trial: trial seed s tests on env seeds s*stride + i;
                                         # protocol: every trial on the baselines table's days
                                         # and env seeds (episodes then come from the table)
      families: 2                        # also test each trial on the first k of its task's
                                         # held-out families (or a list of family names)
    algorithms:                          # name: one of Trainer's algorithms, or rllib_ppo
      PPO:
        tasks: [battery_arbitrage]       # default: every campaign task the algorithm can train
        settings:                        # named variants; default: {default: {}}
          default:
            config: ../configs/battery_arbitrage.yaml   # run config (relative to this file),
                                                        # or {task: path} per task
            algorithm_kwargs: {learning_rate: 0.0003}   # merged over the config's
            overrides: {evaluation: {freq: 4096}}       # any other run-config field
    ray:                                 # --backend ray only
      cpus_per_trial: 1
      max_concurrent_trials: null        # null: as many as the cluster's CPUs allow

Every (task, algorithm, setting, seed) is one :class:`TrialSpec` with the id
``<task>-<algorithm>-<setting>-seed<seed>``; trials run seed by seed (every trial of the first
seed, then the next), so a campaign stopped part-way covers every task with its first seeds.
A trial's run config is resolved in this order: the
setting's config file (or just the task), the campaign budget (then ``per_task``), the setting's
``overrides`` and ``algorithm_kwargs``, then the fields the campaign owns (no checkpoints, no
TensorBoard, no progress bar, one torch thread, the run folder inside the trial folder). Every
trial's config is validated here (:class:`~powerzoo.rl.config.TrainConfig`), so a bad key fails
before anything trains
(:mod:`powerzoo.rl.campaigns.parse`).

``rllib_ppo`` trials (RLlib PPO on a multi-agent task; :mod:`powerzoo.integrations.rllib`) take
the setting keys ``sharing`` (``shared`` | ``per_group`` | ``per_agent``), ``training``
(``PPOConfig.training`` arguments), ``num_env_runners``, ``num_envs_per_env_runner`` and ``env``
(environment keyword arguments); they run on the Ray backend only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CampaignError",
    "CampaignSpec",
    "TrialSpec",
    "evaluation_protocol",
    "RLLIB_PPO",
    "SHARING_MODES",
    "MODEL_CHOICES",
]

RLLIB_PPO = "rllib_ppo"
SHARING_MODES = ("shared", "per_group", "per_agent")
MODEL_CHOICES = ("best", "final")


class CampaignError(ValueError):
    """A campaign file that cannot run; the message names the file and the offending key."""


@dataclasses.dataclass(frozen=True)
class TrialSpec:
    """One (task, algorithm, setting, seed) of a campaign.

    Attributes:
        trial_id: ``<task>-<algorithm>-<setting>-seed<seed>`` (stable: the trial's folder name).
        config: for Trainer algorithms the resolved run-config dict (without ``output_dir`` /
            ``name``, which the runner sets); for ``rllib_ppo`` the RLlib settings plus the budget.
        config_hash: first 16 hex digits of the SHA-256 of ``config`` (a changed setting under
            the same id is refused instead of being mixed with old results). The evaluation
            protocol is not part of it (it is the campaign's, :func:`evaluation_protocol`):
            ``--update`` compares both.
        track: the compute track trained on (:meth:`powerzoo.rl.tracks.Track.to_dict`; its
            allowance is in ``config`` as ``total_timesteps`` and a ``wall_clock`` stop
            condition), or ``None`` for the budget's steps.
    """

    trial_id: str
    task: str
    algorithm: str
    setting: str
    seed: int
    config: dict[str, Any]
    config_hash: str
    track: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """Policy name of the trial's (algorithm, setting) in the pooled table."""
        return f"{self.algorithm}/{self.setting}"

    @property
    def trial_label(self) -> str:
        """Policy name of this one trial (``trials.csv``)."""
        return f"{self.label}/seed{self.seed}"

    @property
    def is_rllib(self) -> bool:
        """Whether the trial trains with RLlib's PPO (it needs the Ray backend)."""
        return self.algorithm == RLLIB_PPO

    def to_dict(self) -> dict[str, Any]:
        """The trial's fields as a plain dict.

        Returns:
            Field name to value.
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialSpec:
        """The trial :meth:`to_dict` wrote.

        Args:
            data: Field name to value.

        Returns:
            The trial.
        """
        return cls(
            **{
                f.name: data[f.name]
                for f in dataclasses.fields(cls)
                if f.name in data or f.default is dataclasses.MISSING
            }
        )


@dataclasses.dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign: its evaluation protocol and its trials (in file order)."""

    name: str
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    split: str
    episodes: int | None | dict[str, int | None]
    baselines: tuple[str, ...]
    model: str
    plots: bool
    trials: tuple[TrialSpec, ...]
    cpus_per_trial: float = 1.0
    max_concurrent_trials: int | None = None
    notes: tuple[str, ...] = ()
    source: str | None = None
    env_seeds: str = "trial"
    families: int | tuple[str, ...] | None = None

    def families_of(self, task: str) -> tuple[str, ...]:
        """The held-out families each trial of ``task`` is also tested on
        (:func:`~powerzoo.rl.campaigns.family_episodes.resolve_families`).

        Args:
            task: A campaign task.

        Returns:
            Family (split) names, none when the campaign asks for none.
        """
        from powerzoo.rl.campaigns.family_episodes import resolve_families

        return resolve_families(task, self.families)

    def eval_seed(self, trial: TrialSpec) -> int:
        """The campaign seed ``trial`` is tested with (:func:`~powerzoo.benchmarks.campaign.
        run_campaign`'s, its env seeds ``seed * stride + i``): the trial's own seed, or with
        ``env_seeds: protocol`` the baselines table's (the same env seeds for every trial, so
        every claim against a baseline is paired on days and env seeds).

        Args:
            trial: A trial of the campaign.

        Returns:
            The campaign seed of its test episodes.
        """
        if self.env_seeds != "protocol":
            return trial.seed
        from powerzoo.benchmarks.baselines import evaluation_protocol as table_protocol

        return int(table_protocol(trial.task, self.split)["seed"])

    def trial(self, trial_id: str) -> TrialSpec:
        """The trial of id ``trial_id``; ``KeyError`` if there is none.

        Args:
            trial_id: A trial id of :attr:`trials`.

        Returns:
            The trial.
        """
        for t in self.trials:
            if t.trial_id == trial_id:
                return t
        raise KeyError(f"no trial {trial_id!r} in campaign {self.name}")

    def fingerprint(self) -> str:
        """Hash of the evaluation protocol and every trial's config (a resumed campaign must match
        it).

        Returns:
            The hash, hexadecimal.
        """
        data = {
            "tasks": self.tasks,
            "seeds": self.seeds,
            "split": self.split,
            "episodes": self.episodes,
            "baselines": self.baselines,
            "model": self.model,
            "trials": [(t.trial_id, t.config_hash) for t in self.trials],
        }
        if self.env_seeds != "trial":  # campaigns written before the key keep their hash
            data["env_seeds"] = self.env_seeds
        if self.families:
            data["families"] = self.families
        return config_hash(data)

    def to_dict(self) -> dict[str, Any]:
        """The campaign as a plain dict (written as ``campaign.json``).

        Returns:
            Field name to value, trials as dicts.
        """
        data = dataclasses.asdict(self)
        data["fingerprint"] = self.fingerprint()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignSpec:
        """The campaign :meth:`to_dict` wrote (a campaign folder's ``campaign.json``).

        Args:
            data: The dict :meth:`to_dict` wrote.

        Returns:
            The campaign.
        """
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        for name in ("tasks", "seeds", "baselines", "notes"):
            if name in values:
                values[name] = tuple(values[name])
        if isinstance(values.get("families"), list):
            values["families"] = tuple(values["families"])
        values["trials"] = tuple(TrialSpec.from_dict(t) for t in data["trials"])
        return cls(**values)


def evaluation_protocol(campaign: Mapping[str, Any], task: str) -> tuple[Any, ...]:
    """``(split, evaluation.episodes for task, model[, env_seeds][, families])`` of a campaign as
    a dict
    (:meth:`CampaignSpec.to_dict`, a folder's ``campaign.json``): what a trial of ``task`` was
    tested with. A trial evaluated under another protocol is out of date, whatever its config."""
    episodes = campaign.get("episodes")
    if isinstance(episodes, Mapping):
        episodes = episodes.get(task)
    protocol = (campaign.get("split"), episodes, campaign.get("model"))
    env_seeds = campaign.get("env_seeds", "trial")
    if env_seeds != "trial":
        protocol = (*protocol, env_seeds)
    families = campaign.get("families")
    return protocol if not families else (*protocol, json.dumps(families))


def config_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
