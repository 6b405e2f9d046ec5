"""Training campaigns: tasks x algorithms x settings x seeds, trained, evaluated and tabulated.

::

    from powerzoo.rl.campaigns import load_campaign, run_local

    outcome = run_local("campaigns/smoke.yaml", out_dir="results/smoke")
    print(outcome.markdown())      # the tables of `powerzoo bench`, one row per algorithm/setting
    outcome.trials                  # one row per trial (also trials.csv)

or ``powerzoo campaign campaigns/smoke.yaml [--backend local|ray]``. The pieces: the campaign file
and its trials (:mod:`~powerzoo.rl.campaigns.spec`, read by :mod:`~powerzoo.rl.campaigns.parse`),
one trial (:mod:`~powerzoo.rl.campaigns.trial`), the local loop
(:mod:`~powerzoo.rl.campaigns.local`), the tables (:mod:`~powerzoo.rl.campaigns.gather`). The Ray
Tune backend is :mod:`powerzoo.integrations.tune`; it runs the same trial function, so the same
seeds give the same numbers on both. Nothing here imports Ray or, until a trial runs, torch.
"""

from __future__ import annotations

from powerzoo.rl.campaigns.gather import CampaignOutcome, gather
from powerzoo.rl.campaigns.local import OutFolderBusyError, run_local
from powerzoo.rl.campaigns.parse import load_campaign, parse_campaign
from powerzoo.rl.campaigns.spec import CampaignError, CampaignSpec, TrialSpec
from powerzoo.rl.campaigns.trial import read_record, run_trial

__all__ = [
    "CampaignError",
    "CampaignOutcome",
    "CampaignSpec",
    "OutFolderBusyError",
    "TrialSpec",
    "gather",
    "load_campaign",
    "parse_campaign",
    "read_record",
    "run_local",
    "run_trial",
]
