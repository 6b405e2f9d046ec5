"""Finished trials whose held-out families changed: run only the new families on the saved model.

A task's families can change after some of its trials have finished (a family found to equal
the test split is removed, so ``evaluation.families: k`` now names another one). Those records
are complete except for their family rows, and training them again would cost the whole compute
allowance for a few test-day episodes. :func:`top_up_families` instead loads each such trial's
tested model from its run folder and checks that it still plays the recorded first test episode
to the same return (else the saved model is not the one that was tested, and the record is left
as it is). It then runs the families the record lacks or holds with a broken row
(:func:`~powerzoo.rl.campaigns.family_episodes.run_family_episodes`, the same days and env seeds
as a fresh trial) and drops the families the campaign no longer names. The record keeps a
``families_topped_up`` entry: the families added and dropped, when, and the code that ran them.

The campaign runners (local and Ray) call it on a folder before they schedule anything, so
running ``powerzoo campaign`` again tops such records up instead of leaving them out.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from powerzoo.rl.campaigns.family_episodes import family_problem, run_family_episodes
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec

__all__ = ["TopUpReport", "family_only_problem", "top_up_and_report", "top_up_families"]


@dataclass
class TopUpReport:
    """What :func:`top_up_families` did.

    Attributes:
        topped_up: Trial ids whose records gained (or lost) family rows.
        refused: Trial id -> why its record was left as it is.
    """

    topped_up: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def family_only_problem(
    record: Mapping[str, Any], trial: TrialSpec, campaign: CampaignSpec
) -> str | None:
    """The record's family problem when that is all that keeps it from answering ``campaign``
    (``None``: it answers it, or something else is wrong with it too)."""
    from powerzoo.rl.campaigns.trial import record_problem

    problem = record_problem(dict(record), trial, campaign)
    if problem is None:
        return None
    names = record.get("cost_names") or []
    own = family_problem(record, campaign.families_of(trial.task), names)
    return problem if own == problem else None


def _replays_first_episode(entry: Any, record: Mapping[str, Any], split: str) -> str | None:
    """Why the saved model does not replay the record's first test episode (``None``: it
    does, to the last bit)."""
    from powerzoo.benchmarks.evaluation import rollout

    first = record["episodes"][0]
    env = entry.make_env(split)
    try:
        got = rollout(
            env, entry.make_policy(env, 0), day_id=int(first["day_id"]), seed=first.get("env_seed")
        )
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    if float(got["return"]) != float(first["return"]):
        return (
            f"its saved model returns {float(got['return']):.10g} on test day {first['day_id']}, "
            f"the record {float(first['return']):.10g}: not the tested model"
        )
    return None


def top_up_families(
    campaign: CampaignSpec, out_dir: str | Path, progress: bool | None = False
) -> TopUpReport:
    """Top up every finished trial of ``out_dir`` whose only problem is its family rows
    (module docstring).

    Args:
        campaign: The campaign (its families and evaluation protocol).
        out_dir: The campaign folder.
        progress: A tqdm bar over the trials topped up (``None``: when stderr is a terminal).

    Returns:
        The trials topped up and the ones left as they were, with why.
    """
    from powerzoo.benchmarks.stats import episode_seed
    from powerzoo.fileio import write_json
    from powerzoo.progress import progress_bar
    from powerzoo.provenance import code_provenance
    from powerzoo.rl.campaigns.trial import (
        TRIAL_FILE,
        one_thread,
        read_json_object,
        trained_entry,
        trial_dir,
    )

    report = TopUpReport()
    todo: list[tuple[TrialSpec, dict[str, Any]]] = []
    for trial in campaign.trials:
        path = trial_dir(out_dir, trial) / TRIAL_FILE
        if not path.is_file():
            continue
        record = read_json_object(path, f"delete {path.parent} to run trial {trial.trial_id} again")
        if record.get("config_hash") != trial.config_hash:
            continue
        if family_only_problem(record, trial, campaign) is not None:
            todo.append((trial, record))
    bar = progress_bar(todo, progress=progress, desc="families topped up", unit="trial")
    for trial, record in bar:
        folder = trial_dir(out_dir, trial)
        wanted = campaign.families_of(trial.task)
        held = record.get("families") if isinstance(record.get("families"), Mapping) else {}
        try:
            with one_thread():
                entry, _ = trained_entry(trial, folder / "run", record.get("model", "best"))
                why = _replays_first_episode(entry, record, campaign.split)
                if why is not None:
                    report.refused[trial.trial_id] = why
                    continue
                names = record["cost_names"]
                added = [  # missing, or held with a row that fails the record check: run again
                    f
                    for f in wanted
                    if f not in held or family_problem({"families": held}, (f,), names)
                ]
                rows = run_family_episodes(
                    trial.task,
                    added,
                    entry.make_env,
                    functools.partial(entry.make_policy, seed=0),
                    record["days"],
                    episode_seed(campaign.eval_seed(trial), 0),
                    names,
                )
        except (OSError, ValueError, KeyError) as err:
            report.refused[trial.trial_id] = f"its saved model could not be run: {err}"
            continue
        dropped = [f for f in held if f not in wanted]
        record["families"] = {f: rows[f] if f in added else held[f] for f in wanted}
        log = list(record.get("families_topped_up", []))
        log.append(
            {"added": added, "dropped": dropped, "at": time.time(), "code": code_provenance()}
        )
        record["families_topped_up"] = log
        write_json(folder / TRIAL_FILE, record)
        report.topped_up.append(trial.trial_id)
    return report


def top_up_and_report(
    campaign: CampaignSpec, out_dir: str | Path, progress: bool | None = False
) -> TopUpReport:
    """:func:`top_up_families`, with a line on stderr for the records topped up and a
    ``RuntimeWarning`` for each one left as it was (it is then left out of the tables)."""
    import sys
    import warnings

    report = top_up_families(campaign, out_dir, progress)
    if report.topped_up:
        print(
            f"powerzoo: {len(report.topped_up)} finished trial(s) given the families the campaign "
            f"now names, from their saved models: {', '.join(report.topped_up)}",
            file=sys.stderr,
        )
    for trial_id, why in report.refused.items():
        warnings.warn(
            f"trial {trial_id}: its families could not be topped up ({why}); "
            "it is left out until it is run again",
            RuntimeWarning,
            stacklevel=2,
        )
    return report
