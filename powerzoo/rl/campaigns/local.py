"""The local backend: run a campaign's trials one after another in this process, then gather them.

Finished trials (``trials/<id>/trial.json`` present, same config) are skipped, so running the same
campaign into the same ``out_dir`` again resumes an interrupted campaign; an interrupted trial is
run again from scratch. A trial that raises is recorded as failed and the loop goes on; the table
notes it. Needs no Ray.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from powerzoo.fileio import read_json, write_json
from powerzoo.progress import progress_bar
from powerzoo.rl.campaigns.gather import CampaignOutcome, gather
from powerzoo.rl.campaigns.parse import load_campaign
from powerzoo.rl.campaigns.spec import CampaignSpec
from powerzoo.rl.campaigns.trial import read_record, run_trial

__all__ = ["run_local", "CAMPAIGN_FILE", "check_out_dir", "as_campaign"]

CAMPAIGN_FILE = "campaign.json"


def as_campaign(campaign: CampaignSpec | str | Path) -> CampaignSpec:
    """A :class:`CampaignSpec` from a spec or a campaign file path."""
    return campaign if isinstance(campaign, CampaignSpec) else load_campaign(campaign)


def check_out_dir(campaign: CampaignSpec, out_dir: str | Path) -> Path:
    """Create ``out_dir`` and its ``campaign.json``; ``ValueError`` if it holds another campaign.

    Another campaign means another evaluation protocol or other trial configs; a folder of the
    same campaign is resumed.
    """
    out = Path(out_dir).resolve()
    path = out / CAMPAIGN_FILE
    if path.is_file():
        held = read_json(path).get("fingerprint")
        if held != campaign.fingerprint():
            raise ValueError(
                f"{out} holds another campaign (fingerprint {held}, "
                f"this one {campaign.fingerprint()}); "
                "choose another --out folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, campaign.to_dict())
    return out


def run_local(
    campaign: CampaignSpec | str | Path,
    out_dir: str | Path = "results/campaign",
    progress: bool | None = None,
    *,
    gather_results: bool = True,
) -> CampaignOutcome | dict[str, Any]:
    """Run every unfinished trial in turn, then gather
    (:func:`~powerzoo.rl.campaigns.gather.gather`).

    Returns the :class:`~powerzoo.rl.campaigns.gather.CampaignOutcome`, or with
    ``gather_results=False`` the records by trial id. ``rllib_ppo`` trials need the Ray backend
    (``ValueError`` before anything runs).
    """
    campaign = as_campaign(campaign)
    rllib = [t.trial_id for t in campaign.trials if t.is_rllib]
    if rllib:
        raise ValueError(
            f"rllib_ppo trials ({', '.join(rllib[:3])}{', ...' if len(rllib) > 3 else ''}) "
            "run on the "
            "Ray backend: use --backend ray"
        )
    out = check_out_dir(campaign, out_dir)
    records: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    todo = []
    for trial in campaign.trials:
        record = read_record(out, trial)
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
