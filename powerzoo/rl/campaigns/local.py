"""The local backend: run a campaign's trials one after another in this process, then gather them.

Finished trials (``trials/<id>/trial.json`` present, same config) are skipped, so running the same
campaign into the same ``out_dir`` again resumes an interrupted campaign; an interrupted trial is
run again from scratch. A trial that raises is recorded as failed and the loop goes on; the table
notes it. A record that reads but is damaged (a field missing, episodes other than the protocol's,
a return or cost that is not finite: :func:`~powerzoo.rl.campaigns.trial.record_problem`) is left
out with a one-line warning and counts as failed; it is not run again until its folder is
deleted. Needs no Ray.

One campaign at a time per folder: the local loop and the Ray backend hold an exclusive lock on
``<out_dir>/.campaign.lock`` (:func:`lock_out_dir`) for the campaign's whole life; a second
campaign started into the same folder stops at once with :class:`OutFolderBusyError`, naming the
folder and the process holding it. The operating system releases the lock when its holder ends,
killed or not.
"""

from __future__ import annotations

import contextlib
import difflib
import shutil
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from powerzoo.fileio import exclusive_lock, write_json
from powerzoo.progress import progress_bar
from powerzoo.rl.campaigns.family_top_up import top_up_and_report
from powerzoo.rl.campaigns.gather import CampaignOutcome, gather
from powerzoo.rl.campaigns.parse import load_campaign
from powerzoo.rl.campaigns.spec import CampaignSpec, evaluation_protocol
from powerzoo.rl.campaigns.trial import (
    InvalidRecordError,
    read_json_object,
    read_record,
    run_trial,
    warn_left_out,
)

__all__ = [
    "run_local",
    "CAMPAIGN_FILE",
    "LOCK_FILE",
    "OutFolderBusyError",
    "check_out_dir",
    "supersede_changed_trials",
    "lock_out_dir",
    "as_campaign",
]

CAMPAIGN_FILE = "campaign.json"
SUPERSEDED_DIR = "superseded"  # records of trials an updated campaign file changed or dropped
LOCK_FILE = ".campaign.lock"


class OutFolderBusyError(ValueError):
    """Another process runs a campaign into the same output folder."""


@contextlib.contextmanager
def lock_out_dir(out_dir: str | Path) -> Iterator[Path]:
    """Hold the campaign folder ``out_dir`` (created if missing) for the ``with`` block.

    Takes an exclusive ``flock`` on ``<out_dir>/.campaign.lock`` and writes this process id
    into it (:func:`powerzoo.fileio.exclusive_lock`); :class:`OutFolderBusyError` (naming the
    folder and the holder's pid) if another process holds it. Yields the folder's absolute path.
    The lock file stays in place (deleting it would let two processes lock two different files).
    """
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE

    def busy(holder: str) -> OutFolderBusyError:
        return OutFolderBusyError(
            f"{out} is in use by another campaign (pid {holder}, lock file {path}); wait "
            "for it to finish or choose another --out folder"
        )

    with exclusive_lock(path, busy):
        yield out


def as_campaign(campaign: CampaignSpec | str | Path) -> CampaignSpec:
    """A :class:`CampaignSpec` from a spec or a campaign file path."""
    return campaign if isinstance(campaign, CampaignSpec) else load_campaign(campaign)


def check_out_dir(
    campaign: CampaignSpec,
    out_dir: str | Path,
    update: bool = False,
    rerun: Sequence[str] = (),
) -> Path:
    """Create ``out_dir`` and its ``campaign.json``; ``ValueError`` if it holds another campaign.

    Another campaign means another evaluation protocol or other trial configs; a folder of the
    same campaign is resumed. With ``update=True`` a campaign file edited since the folder was
    started (a task or an algorithm added, a preset changed) takes the folder over instead:
    :func:`supersede_changed_trials` moves the records of trials it no longer holds, or holds with
    another config or another evaluation protocol, to ``superseded/``, and the unchanged ones are
    kept. ``rerun``: trial ids whose records (finished or not) :func:`supersede_trials` sets
    aside, so that they run again. A damaged ``campaign.json`` is a
    :class:`~powerzoo.fileio.CorruptFileError`. Call it inside :func:`lock_out_dir`.
    """
    unknown_trials(campaign, rerun)
    out = Path(out_dir).resolve()
    path = out / CAMPAIGN_FILE
    if path.is_file():
        remedy = (
            "delete it if this folder holds this campaign's trials, or choose another --out folder"
        )
        previous = read_json_object(path, remedy)
        held = previous.get("fingerprint")
        if held != campaign.fingerprint():
            if not update:
                raise ValueError(
                    f"{out} holds another campaign (fingerprint {held}, "
                    f"this one {campaign.fingerprint()}); "
                    "choose another --out folder, or pass --update to keep the unchanged trials "
                    "and run the changed and new ones"
                )
            supersede_changed_trials(campaign, out, previous)
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, campaign.to_dict())
    if rerun:
        supersede_trials(out, rerun)
    return out


def unknown_trials(campaign: CampaignSpec, trial_ids: Sequence[str]) -> None:
    """``ValueError`` naming the ids of ``trial_ids`` that ``campaign`` does not hold, each with
    the closest ids it does hold."""
    known = [t.trial_id for t in campaign.trials]
    unknown = [t for t in trial_ids if t not in known]
    if unknown:
        hints = [
            f"{t!r} (closest: {', '.join(difflib.get_close_matches(t, known, n=2)) or 'none'})"
            for t in unknown
        ]
        raise ValueError(f"campaign {campaign.name} holds no trial {'; '.join(hints)}")


def supersede_trials(out_dir: str | Path, trial_ids: Sequence[str]) -> list[Path]:
    """Set the folders of ``trial_ids`` aside in ``<out_dir>/superseded/<trial id>-<config hash
    or "unfinished">-rerun/`` so that the campaign runs them again from scratch, and the Ray Tune
    experiment (which holds them as done) in ``superseded/ray-<n>``. Trials without a folder
    are left alone (they run anyway). Returns the new paths."""
    out = Path(out_dir)
    moved = []
    for trial_id in trial_ids:
        folder = out / "trials" / trial_id
        if not folder.is_dir():
            continue
        record_path = folder / "trial.json"
        held = None
        if record_path.is_file():
            held = read_json_object(record_path, f"delete {folder}").get("config_hash")
        moved.append(_set_aside(out, folder, f"{trial_id}-{held or 'unfinished'}-rerun"))
    if moved:
        moved.extend(_set_ray_aside(out))
    return moved


def _set_aside(out: Path, folder: Path, name: str) -> Path:
    """Move ``folder`` to ``<out>/superseded/<name>`` (replacing an earlier one of that name)."""
    target = out / SUPERSEDED_DIR / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(folder), str(target))
    return target


def _set_ray_aside(out: Path) -> list[Path]:
    """Move the Ray Tune experiment ``<out>/ray`` (its trial grid and states) to
    ``superseded/ray-<n>``, so that the next Ray run starts a new grid; ``[]`` without one."""
    ray_dir = out / "ray"
    if not ray_dir.is_dir():
        return []
    aside = out / SUPERSEDED_DIR
    return [_set_aside(out, ray_dir, f"ray-{len(list(aside.glob('ray-*')))}")]


def supersede_changed_trials(
    campaign: CampaignSpec, out_dir: str | Path, previous: dict[str, Any] | None = None
) -> list[Path]:
    """Move the finished trials of ``out_dir`` that ``campaign`` no longer holds, or holds with
    another config, to ``<out_dir>/superseded/<trial id>-<old config hash>/``, and a Ray Tune
    experiment (``ray/``, whose trial grid is the old one) to ``superseded/ray-<n>``.

    ``previous``: the folder's old ``campaign.json``; a trial whose task it evaluated under
    another protocol (split, ``evaluation.episodes`` for the task, model) is changed too, so
    trained rows and baselines are never evaluated on different days. Returns the new paths.
    Unfinished trial folders of such trials are removed (they restart from scratch anyway).
    """
    out = Path(out_dir)
    now = campaign.to_dict()
    wanted = {
        t.trial_id: t.config_hash
        for t in campaign.trials
        if previous is None
        or evaluation_protocol(previous, t.task) == evaluation_protocol(now, t.task)
    }
    moved: list[Path] = []
    trials = out / "trials"
    for folder in sorted(trials.iterdir()) if trials.is_dir() else []:
        record_path = folder / "trial.json"
        held = None
        if record_path.is_file():
            held = read_json_object(record_path, f"delete {folder}").get("config_hash")
            if held is not None and wanted.get(folder.name) == held:
                continue
        elif any(t.trial_id == folder.name for t in campaign.trials):
            continue  # unfinished trial of this campaign: it reruns from scratch
        moved.append(_set_aside(out, folder, f"{folder.name}-{held or 'unfinished'}"))
    return moved + _set_ray_aside(out)


def run_local(
    campaign: CampaignSpec | str | Path,
    out_dir: str | Path = "results/campaign",
    progress: bool | None = None,
    *,
    gather_results: bool = True,
    update: bool = False,
    rerun: Sequence[str] = (),
) -> CampaignOutcome | dict[str, Any]:
    """Run every unfinished trial in turn, then gather
    (:func:`~powerzoo.rl.campaigns.gather.gather`).

    Returns the :class:`~powerzoo.rl.campaigns.gather.CampaignOutcome`, or with
    ``gather_results=False`` the records by trial id. ``rllib_ppo`` trials need the Ray backend
    (``ValueError`` before anything runs). Holds ``out_dir``'s lock (:func:`lock_out_dir`) until
    it returns: :class:`OutFolderBusyError` if another campaign runs into it. ``update``: take
    over a folder started by an earlier version of the campaign file (:func:`check_out_dir`).

    Args:
        campaign: A campaign, or the path of its YAML file.
        out_dir: The campaign folder.
        progress: Show progress bars (``None``: when the output is a terminal).
        gather_results: Gather the tables and plots once the trials have run.
        update: Take over a folder started by an earlier version of the campaign file.
        rerun: Trial ids to run again from scratch, their earlier records set aside
            (:func:`supersede_trials`).

    Returns:
        The gathered campaign, or the records by trial id.
    """
    campaign = as_campaign(campaign)
    rllib = [t.trial_id for t in campaign.trials if t.is_rllib]
    if rllib:
        raise ValueError(
            f"rllib_ppo trials ({', '.join(rllib[:3])}{', ...' if len(rllib) > 3 else ''}) "
            "run on the "
            "Ray backend: use --backend ray"
        )
    with lock_out_dir(out_dir) as out:
        return _run_locked(campaign, out, progress, gather_results, update, rerun)


def _run_locked(
    campaign: CampaignSpec,
    out_dir: Path,
    progress: bool | None,
    gather_results: bool,
    update: bool = False,
    rerun: Sequence[str] = (),
) -> CampaignOutcome | dict[str, Any]:
    out = check_out_dir(campaign, out_dir, update=update, rerun=rerun)
    top_up_and_report(campaign, out, progress)
    records: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    todo = []
    for trial in campaign.trials:
        try:
            record = read_record(out, trial, campaign)
        except InvalidRecordError as err:  # left out, not run again: its folder is evidence
            failed[trial.trial_id] = warn_left_out(err)
            continue
        if record is None:
            todo.append(trial)
        else:
            records[trial.trial_id] = record
    bar = progress_bar(
        total=len(campaign.trials),
        initial=len(records),
        desc=f"campaign {campaign.name}",
        unit="trial",
        progress=progress,
    )
    for trial in todo:
        bar.set_description(f"campaign {campaign.name}: {trial.trial_id}")
        try:
            records[trial.trial_id] = run_trial(campaign, trial, out)
        except Exception as err:  # one failing trial must not lose the others
            failed[trial.trial_id] = f"{type(err).__name__}: {err}"
            (out / "trials" / trial.trial_id).mkdir(parents=True, exist_ok=True)
            (out / "trials" / trial.trial_id / "error.txt").write_text(traceback.format_exc())
        bar.update(1)
    bar.close()
    if not gather_results:
        return records
    return gather(campaign, records, out, failed, progress=progress)
