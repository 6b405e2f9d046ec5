"""Training campaigns on Ray Tune: every trial of a campaign file is one Tune trial.

::

    from powerzoo.integrations.tune import run_ray

    outcome = run_ray("campaigns/smoke.yaml", out_dir="results/smoke-ray")          # local Ray
    outcome = run_ray("campaigns/benchmark.yaml", address="10.0.0.1:6379")          # a cluster

or ``powerzoo campaign CAMPAIGN.yaml --backend ray [--address ADDR]``. Each trial is the function
trainable :func:`campaign_trainable` (1 CPU by default, ``ray.cpus_per_trial`` in the campaign
file), which runs the same :func:`powerzoo.rl.campaigns.trial.run_trial` as the local backend and
reports one row (``tune.report``): the trial id, its mean test return and normalised score, and
the whole trial record as JSON (``record_json``: the test episodes). The driver writes each record
as ``trials/<id>/trial.json`` and gathers exactly as the local backend does
(:func:`powerzoo.rl.campaigns.gather.gather`), so the same seeds give the same table.

``rllib_ppo`` trials build :func:`powerzoo.integrations.rllib.ppo_config`, call ``train()``
until the budget, save a checkpoint and evaluate :class:`~powerzoo.integrations.rllib.RLlibPolicy`
on the test split; they ask for one more CPU per remote env runner.

Resuming: the Tune experiment lives in ``<out>/ray/campaign``. If the driver dies, running the
same command again restores it
(``Tuner.restore(..., resume_unfinished=True, restart_errored=True)``); trials whose ``trial.json``
exists are not trained again. On a cluster, ``--out`` should be on a filesystem every node sees
(NFS) for the trial folders (models, plots) to land in one place; the table needs only what the
trials report.

Ray is imported only inside these functions; without it they raise ``ImportError`` naming
``pip install "powerzoo[ray]"``.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.rl.campaigns.family_top_up import top_up_and_report
from powerzoo.rl.campaigns.gather import CampaignOutcome, gather
from powerzoo.rl.campaigns.local import as_campaign, check_out_dir, lock_out_dir
from powerzoo.rl.campaigns.spec import CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import (
    base_record,
    evaluate_policy,
    one_thread,
    prepare_folder,
    read_record,
    run_trial,
    write_record,
)

__all__ = ["run_ray", "campaign_trainable", "run_rllib_trial", "EXPERIMENT", "require_tune"]

EXPERIMENT = "campaign"
"""Name of the Tune experiment folder inside ``<out>/ray``."""
_INSTALL = 'the Ray backend needs Ray Tune: pip install "powerzoo[ray]"'


def require_tune() -> tuple[Any, Any]:
    """``(ray, ray.tune)``; ``ImportError`` with the pip command when the extra is missing.

    Returns:
        The ``ray`` and ``ray.tune`` modules.
    """
    try:
        import ray
        from ray import tune
    except ImportError:
        raise ImportError(_INSTALL) from None
    return ray, tune


def run_rllib_trial(
    campaign: CampaignSpec, trial: TrialSpec, out_dir: str | Path
) -> dict[str, Any]:
    """Train RLlib PPO for one ``rllib_ppo`` trial, save its checkpoint,
    evaluate it; writes ``trial.json``.

    Args:
        campaign: The campaign (its evaluation protocol).
        trial: An ``rllib_ppo`` trial.
        out_dir: The campaign folder.

    Returns:
        The trial's record.
    """
    folder, record = prepare_folder(out_dir, trial, campaign)
    if record is not None:
        return record
    from powerzoo.benchmarks.campaign import PolicyEntry
    from powerzoo.envs.make import make_env
    from powerzoo.integrations.rllib import RLlibPolicy, ppo_config

    cfg = trial.config
    env_kwargs = dict(cfg["env"])
    with one_thread():
        started = time.perf_counter()
        config = ppo_config(
            trial.task,
            cfg["sharing"],
            split="train",
            seed=trial.seed,
            num_env_runners=cfg["num_env_runners"],
            num_envs_per_env_runner=cfg["num_envs_per_env_runner"],
            **env_kwargs,
        )
        if cfg["training"]:
            config = config.training(**cfg["training"])
        algo = config.build_algo()
        steps = 0
        try:
            while steps < cfg["total_timesteps"]:
                steps = int(algo.train()["env_runners"]["num_env_steps_sampled_lifetime"])
            checkpoint = Path(algo.save_to_path(str(folder / "checkpoint")))
        finally:
            algo.stop()
        train_seconds = time.perf_counter() - started
        policy = RLlibPolicy.from_checkpoint(checkpoint, task=trial.task)
        obs_mode = env_kwargs.get("obs_mode")
        task_kwargs = {
            k: v
            for k, v in env_kwargs.items()
            if k not in ("normalize", "obs_mode", "reward", "reward_scale")
        }
        entry = PolicyEntry(
            label=trial.trial_label,
            task=trial.task,
            make_env=lambda split: make_env(trial.task, split, obs_mode=obs_mode, **task_kwargs),
            make_policy=lambda env, seed: policy,
            source=f"{trial.trial_id} (RLlib PPO, {cfg['sharing']} modules)",
            kind="trained",
        )
        started = time.perf_counter()
        evaluation = evaluate_policy(campaign, trial, entry, folder / "evaluation")
    record = {
        **base_record(trial),
        "status": "finished",
        "num_timesteps": steps,
        "train_seconds": train_seconds,
        "eval_seconds": time.perf_counter() - started,
        "model": "final",
        "run_dir": str(checkpoint),
        **evaluation,
    }
    write_record(out_dir, record)
    return record


def campaign_trainable(config: dict[str, Any], campaign: CampaignSpec, out_dir: str) -> None:
    """Tune function trainable of one campaign trial (``config["trial_id"]``);
    reports its record once.

    Args:
        config: Tune's trial config (``trial_id``).
        campaign: The campaign.
        out_dir: The campaign folder.
    """
    from ray import tune

    trial = campaign.trial(config["trial_id"])
    run = run_rllib_trial if trial.is_rllib else run_trial
    record = run(campaign, trial, out_dir)
    tune.report(
        {
            "trial_id": trial.trial_id,
            "mean_return": record["mean_return"],
            "normalized_score": record["normalized_score"],
            "num_timesteps": record["num_timesteps"],
            "train_seconds": record["train_seconds"],
            "record_json": json.dumps(record),
        }
    )


def _trial_dirname(trial: Any) -> str:
    return str(trial.config["trial_id"])


def _resources(campaign: CampaignSpec, config: dict[str, Any]) -> Any:
    """Placement group of one trial: ``cpus_per_trial``,
    plus one CPU per RLlib remote env runner."""
    from ray import tune

    trial = campaign.trial(config["trial_id"])
    bundles = [{"CPU": campaign.cpus_per_trial}]
    if trial.is_rllib:
        bundles += [{"CPU": 1.0}] * int(trial.config["num_env_runners"])
    return tune.PlacementGroupFactory(bundles)


def run_ray(
    campaign: CampaignSpec | str | Path,
    out_dir: str | Path = "results/campaign",
    address: str | None = None,
    progress: bool | None = None,
    update: bool = False,
    rerun: Sequence[str] = (),
) -> CampaignOutcome:
    """Run a campaign's trials as Ray Tune trials, then gather them into the tables of the local
    backend.

    Args:
        campaign: a :class:`~powerzoo.rl.campaigns.spec.CampaignSpec` or a campaign file.
        out_dir: output folder (tables, ``trials/``, the Tune experiment under ``ray/``).
        address: Ray cluster address for ``ray.init(address=...)`` (``"auto"``, ``"HOST:6379"``,
            ``"ray://HOST:10001"``); ``None`` starts a local Ray on this machine. Ignored (with the
            cluster already joined) when Ray is initialised by the caller.
        progress: Tune's status table and the baselines' progress bar (``None``: on a terminal).
        update: take over a folder started by an earlier version of the campaign file (changed
            and new trials run, unchanged ones are kept; see
            :func:`~powerzoo.rl.campaigns.local.check_out_dir`).
        rerun: Trial ids to run again from scratch, their earlier records and the Tune
            experiment set aside (:func:`~powerzoo.rl.campaigns.local.supersede_trials`).

    Restores the Tune experiment found in ``out_dir`` (a killed driver); ``ValueError`` if
    ``out_dir`` holds another campaign. The driver holds ``out_dir``'s lock
    (:func:`powerzoo.rl.campaigns.local.lock_out_dir`) until it returns: ``OutFolderBusyError``
    if another campaign runs into it.

    Returns:
        The gathered campaign.
    """
    ray, tune = require_tune()
    campaign = as_campaign(campaign)
    with lock_out_dir(out_dir) as out:
        return _run_ray_locked(ray, tune, campaign, out, address, progress, update, rerun)


def _run_ray_locked(
    ray: Any,
    tune: Any,
    campaign: CampaignSpec,
    out_dir: Path,
    address: str | None,
    progress: bool | None,
    update: bool = False,
    rerun: Sequence[str] = (),
) -> CampaignOutcome:
    out = check_out_dir(campaign, out_dir, update=update, rerun=rerun)
    top_up_and_report(campaign, out, progress)
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=bool(progress))
    records: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    try:
        trainable = tune.with_resources(
            tune.with_parameters(campaign_trainable, campaign=campaign, out_dir=str(out)),
            functools.partial(_resources, campaign),
        )
        storage = out / "ray"
        path = storage / EXPERIMENT
        if tune.Tuner.can_restore(str(path)):
            tuner = tune.Tuner.restore(
                str(path), trainable, resume_unfinished=True, restart_errored=True
            )
        else:
            tuner = tune.Tuner(
                trainable,
                param_space={"trial_id": tune.grid_search([t.trial_id for t in campaign.trials])},
                tune_config=tune.TuneConfig(
                    max_concurrent_trials=campaign.max_concurrent_trials,
                    trial_dirname_creator=_trial_dirname,
                    trial_name_creator=_trial_dirname,
                ),
                run_config=tune.RunConfig(
                    name=EXPERIMENT,
                    storage_path=str(storage),
                    verbose=1 if progress else 0,
                    failure_config=tune.FailureConfig(max_failures=0),
                ),
            )
        for result in tuner.fit():
            # a restored experiment reports trials that never started with no config: their
            # folder is named after the trial
            trial_id = (result.config or {}).get("trial_id") or Path(result.path).name
            record_json = (result.metrics or {}).get("record_json")
            if result.error is not None or record_json is None:
                failed[trial_id] = (
                    str(result.error or "no result reported").strip().splitlines()[-1][:300]
                )
                continue
            record = json.loads(record_json)
            on_disk = read_record(out, campaign.trial(trial_id))
            if on_disk is None:  # the worker wrote it elsewhere (another node)
                write_record(out, record)
            else:  # the folder's record is the truth (a restored experiment reports the old
                record = on_disk  # record of a trial topped up since)
            records[trial_id] = record
    finally:
        if started_here:
            ray.shutdown()
    return gather(campaign, records, out, failed, progress=progress)
