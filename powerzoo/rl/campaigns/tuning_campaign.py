"""Tuning what a campaign runs: the base run config of one (task, algorithm, setting) of a
campaign file, and the validation score of a configuration as the campaign selects its model.

A campaign trains every trial on its compute track with periodic evaluations on the validation
split and, with ``evaluation.model: best``, tests the model of the best validation evaluation.
:func:`campaign_base` gives the tuner that same run config (track, envs, evaluation section and
the setting's ``algorithm_kwargs``, which the sampled values then replace), and
:func:`selected_evaluation` reads the validation numbers of the model the campaign would keep
from the run's evaluation log, so that a tuned configuration is compared with the campaign's own
setting (the *preset*) under one protocol.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from powerzoo.rl.selection import require_selection_split

__all__ = ["CampaignBase", "campaign_base", "selected_evaluation"]


@dataclasses.dataclass(frozen=True)
class CampaignBase:
    """One (task, algorithm, setting) of a campaign, as the tuner starts from it.

    Attributes:
        config: The trial's resolved run config, seed, folder and name left out (its track's
            step cap and timer, its ``n_envs`` and its periodic evaluation on ``val``).
        track: The compute track (:meth:`~powerzoo.rl.tracks.Track.to_dict`), or ``None``.
        model: The model the campaign tests: ``"best"`` (best validation evaluation) or
            ``"final"``.
        setting: The setting's name in the campaign file.
        source: The campaign file.
    """

    config: dict[str, Any]
    track: dict[str, Any] | None
    model: str
    setting: str
    source: str


def campaign_base(
    path: str | Path, task: str, algorithm: str, setting: str | None = None
) -> CampaignBase:
    """The run config the campaign at ``path`` trains ``algorithm`` on ``task`` with.

    Args:
        path: A campaign YAML file.
        task: One of its tasks.
        algorithm: One of its algorithms on that task (any case).
        setting: The setting's name; may be left out when the algorithm has one on the task.

    Returns:
        The :class:`CampaignBase`; ``ValueError`` (one line) when the campaign has no such
        trial, the setting is ambiguous or unknown, or its evaluation would select on a held-out
        split; ``FileNotFoundError`` without the file.
    """
    from powerzoo.rl.campaigns.parse import load_campaign
    from powerzoo.rl.entry_points import is_entry_point

    campaign = load_campaign(path)
    name = algorithm if is_entry_point(algorithm) else str(algorithm).upper()
    trials = [t for t in campaign.trials if t.task == task and t.algorithm == name]
    if not trials:
        runs = sorted({t.algorithm for t in campaign.trials if t.task == task})
        raise ValueError(
            f"campaign {path} has no {name} trial on {task}"
            + (f"; it runs {', '.join(runs)} there" if runs else "; it does not run that task")
        )
    settings = list(dict.fromkeys(t.setting for t in trials))
    if setting is None and len(settings) > 1:
        raise ValueError(
            f"campaign {path} runs {name} on {task} in settings {', '.join(settings)}: name one"
        )
    chosen = settings[0] if setting is None else str(setting)
    if chosen not in settings:
        raise ValueError(
            f"campaign {path} has no setting {chosen!r} of {name} on {task}; "
            f"it has {', '.join(settings)}"
        )
    trial = next(t for t in trials if t.setting == chosen)
    config = {k: v for k, v in trial.config.items() if k not in ("seed", "output_dir", "name")}
    evaluation = config.get("evaluation")
    if campaign.model == "best" and not evaluation:
        raise ValueError(
            f"campaign {path} tests the best model of {name} on {task} but its setting "
            f"{chosen!r} has no periodic evaluation to select it on"
        )
    if evaluation:
        require_selection_split(evaluation.get("split", "val"), "tuning")
    return CampaignBase(config, trial.track, campaign.model, chosen, str(path))


def selected_evaluation(run_dir: str | Path) -> dict[str, Any]:
    """The validation evaluation of the model a campaign with ``model: best`` keeps: the last row
    of the run's evaluation log marked ``new_best`` (the highest mean return when none is).

    Args:
        run_dir: A Trainer run folder (``evaluation/evaluation_metrics.csv`` inside).

    Returns:
        ``{"val_return", "val_episodes", "selected_step", "mean_costs": {name: mean cost}}``;
        ``FileNotFoundError`` when the run wrote no evaluation.
    """
    from powerzoo.rl import run_dir as rd
    from powerzoo.rl.evaluation_log import EVAL_CSV, read_evaluation_csv, selected_row

    path = Path(run_dir) / rd.EVAL_DIR / EVAL_CSV
    rows = read_evaluation_csv(path)
    best = selected_row(rows)
    if best is None:
        raise FileNotFoundError(f"{path}: the run wrote no validation evaluation to select on")
    row = rows[best]
    return {
        "val_return": float(row["mean_return"]),
        "val_episodes": int(float(row["episodes"])),
        "selected_step": int(float(row["timestep"])),
        "mean_costs": {
            k.removeprefix("cost_"): float(v) for k, v in row.items() if k.startswith("cost_")
        },
    }
