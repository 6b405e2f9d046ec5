"""The coverage section of a campaign's benchmark v2 page: trials finished, core-hours spent and
projected, the wall time they took, the baselines table, the tuning budgets, the machines, the
code versions and the trials left out."""

from __future__ import annotations

from collections import Counter
from typing import Any

from powerzoo.benchmarks.trial_submission import kernels_text
from powerzoo.rl.campaigns.page_text import _hours, _share, code_versions_text

__all__ = ["coverage_text"]


def _speed_text(item: dict[str, Any]) -> str:
    """One ``machines.jsonl`` line: when, which machine, env steps per CPU-second per task."""
    hw = item.get("hardware") or {}
    steps = ", ".join(
        f"{task} {value:,.0f}" for task, value in (item.get("env_steps_per_cpu_s") or {}).items()
    )
    return (
        f"{str(item.get('measured_at', '?'))[:16].replace('T', ' ')} UTC, "
        f"{hw.get('cpu_model', 'unknown CPU')}{kernels_text(hw)}: {steps} env steps per "
        f"CPU-second, {item.get('torch_updates_per_cpu_s', 0):,.0f} MLP updates per CPU-second"
    )


def coverage_text(scored: Any) -> str:
    """The page's coverage section of a :class:`~powerzoo.rl.campaigns.score_page.ScoredCampaign`
    (Markdown bullets)."""
    cov = scored.coverage
    per_seed = ", ".join(f"seed {s}: {done}/{n}" for s, (done, n) in cov["per_seed"].items())
    lines = [
        f"- Trials finished: {cov['finished']} of {cov['planned']} "
        f"({_share(cov['finished'] / cov['planned'])}); per seed: {per_seed}.",
        f"- Core-hours spent: {cov['core_hours']:.2f} (training CPU seconds plus test evaluation "
        "seconds of the finished trials, one core each)"
        + (
            f"; {cov['without_cpu_seconds']} record(s) without CPU seconds counted at their "
            "training wall seconds."
            if cov["without_cpu_seconds"]
            else "."
        ),
    ]
    if cov["projected_core_hours"] is not None:
        per_trial = cov["core_hours"] * 3600 / cov["finished"]
        lines.append(
            f"- Whole campaign (projected): {cov['projected_core_hours']:.1f} core-hours "
            f"({_hours(per_trial)} per finished trial on average x {cov['planned']} trials); on "
            f"a {cov['workers']}-worker Ray cluster (one core per trial) about "
            f"{cov['cluster_hours']:.2f} h of wall time (projected / {cov['workers']}), on "
            "cores that run nothing else. Trials of other tasks and algorithms can take longer "
            "than the finished ones."
        )
        lines.append(
            f"- Wall time of the finished trials: {cov['wall_hours']:.2f} h in all, "
            f"{cov['wall_hours'] / max(cov['core_hours'], 1e-12):.2f} x their core-hours (cores "
            "shared with other work run a trial's CPU allowance over a longer wall time; the "
            "allowance is CPU time, so what a trial learns does not depend on it)."
        )
    if (table := cov.get("baselines")) is not None:
        where = "pinned in the campaign folder" if table["pinned"] else "the packaged table"
        lines.append(
            f"- Baselines (anchors, oracles, paired differences): `{table['file']}`, {where}, "
            f"sha256 `{table['sha256']}`."
        )
    tuning = Counter(str(r.get("tuning_budget")) for r in scored.rows)
    lines.append(
        "- Tuning (the rows' `tuning_budget`): "
        + "; ".join(f"{n} row(s): {text}" for text, n in tuning.items())
        + ". A row without a recorded search runs the hyper-parameters its campaign file names "
        "(a run config, or one setting for every task): the effort behind them is not known to "
        "be equal across algorithms."
    )
    machines = "; ".join(f"{m}: {n} trial(s)" for m, n in cov["machines"].items())
    lines.append(f"- Machine (the records' `hardware`): {machines}.")
    if cov.get("machine_speeds"):
        lines.append(
            "- Machine speeds (the folder's `machines.jsonl`, measured on one core when the "
            "campaign started on a machine; trials that finished after a line ran on its machine "
            "until the next line; track S gives CPU seconds, so a slower machine trains a seed on "
            "fewer steps): " + "; ".join(_speed_text(item) for item in cov["machine_speeds"]) + "."
        )
    lines.append(code_versions_text(cov["code"]))
    if cov["left_out"]:
        lines.append(
            f"- Left out ({len(cov['left_out'])}): "
            + "; ".join(f"`{t}`: {why}" for t, why in cov["left_out"].items())
            + "."
        )
    return "\n".join(lines) + "\n"
