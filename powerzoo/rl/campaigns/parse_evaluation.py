"""The ``evaluation`` section of a campaign file: split, days, env seeds, baselines, model,
plots and held-out families (the format: :mod:`powerzoo.rl.campaigns.spec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from powerzoo.rl.campaigns.parse_checks import check_keys, fail, reject_outside
from powerzoo.rl.campaigns.spec import MODEL_CHOICES

__all__ = ["ENV_SEED_CHOICES", "EvaluationSection", "parse_evaluation"]

EVAL_KEYS = {"split", "episodes", "baselines", "model", "plots", "env_seeds", "families"}
ENV_SEED_CHOICES = ("trial", "protocol")
"""``evaluation.env_seeds``: each trial on its own seed's env seeds, or on the baselines
table's (the protocol)."""


@dataclasses.dataclass(frozen=True)
class EvaluationSection:
    """A checked ``evaluation`` section."""

    split: str
    episodes: int | None | dict[str, int | None]
    baselines: tuple[str, ...]
    model: str
    plots: bool
    env_seeds: str
    families: int | tuple[str, ...] | None


def parse_evaluation(where: str, section: Any, tasks: list[str]) -> EvaluationSection:
    """Check a campaign's ``evaluation`` section against its ``tasks``.

    Args:
        where: The file (for messages).
        section: The section as read (``None``: every default).
        tasks: The campaign's tasks.

    Returns:
        The section, defaults filled in.
    """
    from powerzoo.benchmarks.policies import BASELINE_POLICIES
    from powerzoo.tasks import task_spec

    ev = check_keys(where, section, EVAL_KEYS, "evaluation")
    split = str(ev.get("split", "test"))
    for t in tasks:
        if split not in task_spec(t).splits:
            raise fail(
                where,
                f"'evaluation.split': unknown split {split!r} for {t}; "
                f"valid: {', '.join(task_spec(t).splits)}",
            )
    env_seeds = ev.get("env_seeds", "trial")
    if env_seeds not in ENV_SEED_CHOICES:
        raise fail(
            where,
            f"'evaluation.env_seeds' must be one of {', '.join(ENV_SEED_CHOICES)}, "
            f"got {env_seeds!r}",
        )
    if env_seeds == "protocol":
        if "episodes" in ev:
            raise fail(
                where,
                "'evaluation.episodes' with env_seeds: protocol: the days are the baselines "
                "table's; leave episodes out",
            )
        episodes = _table_episodes(where, split, tasks)
    else:
        episodes = _episodes(where, ev.get("episodes"), tasks)
    baselines = ev.get("baselines", list(BASELINE_POLICIES)) or []
    reject_outside(
        where,
        baselines,
        BASELINE_POLICIES,
        "'evaluation.baselines': unknown baseline(s) ",
        f"; valid: {', '.join(BASELINE_POLICIES)}",
    )
    families = _families(where, ev.get("families"), tasks)
    model = ev.get("model", "best")
    if model not in MODEL_CHOICES:
        raise fail(
            where, f"'evaluation.model' must be one of {', '.join(MODEL_CHOICES)}, got {model!r}"
        )
    return EvaluationSection(
        split, episodes, tuple(baselines), model, bool(ev.get("plots", True)), env_seeds, families
    )


def _families(where: str, value: Any, tasks: list[str]) -> int | tuple[str, ...] | None:
    """``evaluation.families``: null, a count k >= 0 (the first k families of each task) or a
    list of family names, each a family of at least one campaign task."""
    from powerzoo.benchmarks.families import scenario_families

    if value is None or value == 0:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise fail(
            where,
            "'evaluation.families' must be a count (the first k families of each task) or a "
            f"list of family names, got {value!r}",
        )
    known = {f for t in tasks for f in scenario_families(t)}
    unknown = [v for v in value if v not in known]
    if unknown:
        raise fail(
            where,
            f"'evaluation.families': no campaign task has the famil(ies) {', '.join(unknown)}; "
            f"theirs: {', '.join(sorted(known)) or 'none'}",
        )
    return tuple(value)


def _table_episodes(where: str, split: str, tasks: list[str]) -> dict[str, int | None]:
    """``{task: days}`` of the baselines table's protocol on ``split`` (``env_seeds:
    protocol``): its day count, checked to be the days a campaign spreads evenly."""
    from powerzoo.benchmarks.baselines import evaluation_protocol, select_days
    from powerzoo.rl.campaigns.trial import _split_day_count

    out: dict[str, int | None] = {}
    for task in tasks:
        try:
            days = evaluation_protocol(task, split)["day_ids"]
        except (KeyError, ValueError) as err:
            raise fail(
                where,
                f"'evaluation.env_seeds: protocol': no baselines protocol for {task} on {split} "
                f"({err})",
            ) from None
        n_days = _split_day_count(task, split)
        if select_days(n_days, len(days)) != list(days):
            raise fail(
                where,
                f"'evaluation.env_seeds: protocol': the baselines table tests {task} on days a "
                "campaign cannot select (not spread evenly over the split)",
            )
        out[task] = None if len(days) == n_days else len(days)
    return out


def _episodes(where: str, value: Any, tasks: list[str]) -> int | None | dict[str, int | None]:
    """``evaluation.episodes``: a positive integer, null (or "all": every day) or a mapping
    ``{task: integer | null}`` of the campaign's tasks (tasks it leaves out: every day)."""

    def one(v: Any, field: str) -> int | None:
        if v in (None, "all"):
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise fail(
                where, f"'{field}' must be a positive integer or null (every day), got {v!r}"
            )
        return v

    if not isinstance(value, Mapping):
        return one(value, "evaluation.episodes")
    unknown = sorted(set(value) - set(tasks))
    if unknown:
        raise fail(
            where,
            f"'evaluation.episodes': {', '.join(map(str, unknown))} not among the campaign's "
            f"tasks ({', '.join(tasks)})",
        )
    return {str(t): one(v, f"evaluation.episodes.{t}") for t, v in value.items()}
