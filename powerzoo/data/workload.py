"""Compute-job arrivals of an AI data centre, indexed by calendar day (training and fine-tuning).

Model (a documented stochastic model, fitted *qualitatively* to published cluster-trace
statistics; no trace file is read):

* Two job classes (:data:`JOB_CLASSES`): ``training`` (few, large, loose deadlines) and
  ``finetune`` (many, small, tight deadlines). Shapes follow the public GPU-cluster traces:
  Microsoft Philly (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
  Training Workloads", USENIX ATC 2019) and Alibaba PAI (Weng et al., "MLaaS in the Wild",
  USENIX NSDI 2022) both report heavy-tailed job sizes in GPU time spanning several orders of
  magnitude (log-normal-like bodies), submissions that peak in the working-day afternoon, and
  fewer submissions at weekends.
* Arrivals: Poisson counts per step with rate
  ``jobs_per_day / steps_per_day * weekly[day_type] * (1 + a * cos(2 pi (h - 14) / 24))``
  (``h`` = hour of day at the step's midpoint, peak at 14:00; ``weekly`` = 1.0 weekday,
  0.7 Saturday, 0.55 Sunday or holiday; ``a`` = 0.2 training, 0.5 fine-tuning).
* Sizes: log-normal GPU-hours (median and sigma per class), clipped to the class's range.
* Deadlines: jobs of one class that arrive in the same step are submitted as one batch with a
  common slack (deadline - arrival) drawn uniformly from the class's range.
* Defaults give about 60 % utilisation of a 2,048-GPU cluster on weekdays (about 29,500 GPU-h
  of work a day: 75 % training, 25 % fine-tuning), less at weekends.

Deadline buckets: a deadline ``tau`` hours after the start of day ``d`` goes to bucket
``j = clip(floor(tau) - 1, 0, 24)``, i.e. it is rounded *down* to the hour boundary and the
work is due by step ``(j + 1) * steps_per_hour`` of the day. Bucket 24 holds work due 25 h or
more after the day starts: it never falls due within a one-day episode.

Day boundaries assume *uniform progress*: a job's work is done at a constant rate between its
arrival and its deadline, so a fraction ``(tau - 24) / slack`` of a job due after midnight is
still left at midnight. The initial queue of day ``d`` is that remainder of day ``d - 1``'s
jobs; ``arrival_carry_gpuh`` is that remainder for each arriving batch in bucket 24: summed over
the batches arrived so far, it is the most work a day can fairly leave to the next (tasks
charge any excess as an SLA violation).

Scenarios: ``base``; ``workload_shock`` doubles every arriving batch (twice the jobs and the
GPU-hours, same deadlines: about 120 % utilisation), read by the ``workload_shock`` split.
Everything is deterministic (fixed seed) and prepared once per process.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from powerzoo.data import calendar

__all__ = [
    "JobClass",
    "JOB_CLASSES",
    "Workload",
    "WORKLOAD_SCENARIOS",
    "N_BUCKETS",
    "NO_ARRIVAL",
    "get_workload",
    "workload_scenario_of_split",
]

WORKLOAD_SEED = 20230202  # fixed: the workload is the same on every machine and run
WORKLOAD_SCENARIOS = ("base", "workload_shock")
HOURS_PER_DAY = 24
NO_ARRIVAL = -1  # per-step row index meaning "no arrival" (the final all-zero row)
N_BUCKETS = HOURS_PER_DAY + 1  # hourly deadline buckets of one day + "due after the day"
WEEKLY_FACTOR = (1.0, 0.7, 0.55)  # weekday, Saturday, Sunday/holiday (calendar.day_types order)
DIURNAL_PEAK_HOUR = 14.0
SHOCK_FACTOR = 2.0


@dataclasses.dataclass(frozen=True)
class JobClass:
    """Arrival and size law of one job class."""

    name: str
    jobs_per_day: float  # mean arrivals on a weekday (jobs/day)
    size_median_gpuh: float  # median job size (GPU-hours)
    size_sigma: float  # log-normal shape (std of log size)
    size_min_gpuh: float
    size_max_gpuh: float
    slack_min_h: float  # deadline - arrival (hours), uniform in [min, max]
    slack_max_h: float
    diurnal_amplitude: float  # relative amplitude of the daily cycle


JOB_CLASSES: tuple[JobClass, ...] = (
    # mean size ~ 48 * exp(1.2^2 / 2) ~ 95 GPU-h after clipping: ~22,000 GPU-h a weekday
    JobClass("training", 230.0, 48.0, 1.2, 1.0, 3000.0, 4.0, 16.0, 0.2),
    # mean size ~ 4 * exp(1.0^2 / 2) ~ 6.5 GPU-h: ~7,400 GPU-h a weekday
    JobClass("finetune", 1130.0, 4.0, 1.0, 0.25, 200.0, 1.0, 4.0, 0.5),
)


@dataclasses.dataclass(frozen=True)
class Workload:
    """Arrivals of one scenario at one step length (read-only arrays).

    Per-step arrays have ``(N_DAYS + 1) * steps_per_day + 1`` rows: the year, one wrap-around
    day (like :class:`powerzoo.data.profiles.Profiles`) and a final all-zero row, so index
    ``NO_ARRIVAL = -1`` reads "nothing arrives". ``arrival_cum_gpuh`` is each batch's work as a
    cumulative queue increment, ``gpuh * (k >= bucket)`` for every bucket ``k``, ready to add to
    a cumulative queue (:mod:`powerzoo.devices.job_queue`) in one operation. GPU-hours are
    float32-representable, so that table (float32) and ``arrival_gpuh`` (float64) agree exactly.
    """

    scenario: str
    step_minutes: int
    steps_per_day: int
    class_names: tuple[str, ...]
    arrival_gpuh: np.ndarray  # [T, C] GPU-hours of work arriving at each step
    arrival_cum_gpuh: (
        np.ndarray
    )  # [T, C, N_BUCKETS] float32: the same as a cumulative queue increment
    arrival_jobs: np.ndarray  # [T, C] number of jobs arriving at each step (int64)
    arrival_bucket: np.ndarray  # [T, C] deadline bucket of that batch in its own day (int64)
    arrival_carry_gpuh: np.ndarray  # [T, C] part of a bucket-24 batch that may be left at midnight
    initial_queue_gpuh: np.ndarray  # [N_DAYS + 1, C, N_BUCKETS] queue at the start of each day
    bucket_due_step: np.ndarray  # [N_BUCKETS] step by which each bucket is due (last: end of day)

    @property
    def steps_per_hour(self) -> int:
        return 60 // self.step_minutes

    def __reduce__(self) -> tuple:
        """Pickle by reference: the arrays are rebuilt (deterministically, cached) on unpickling."""
        return get_workload, (self.scenario, self.step_minutes)


def workload_scenario_of_split(split: str) -> str:
    """Workload scenario a split reads: ``"workload_shock"`` for that split, else ``"base"``."""
    calendar.check_split(split)
    return split if split in WORKLOAD_SCENARIOS else "base"


def _hourly_bucket(deadline_h: np.ndarray) -> np.ndarray:
    """Deadline (hours after the start of a day) -> bucket index, rounded down to the hour."""
    return np.clip(np.floor(deadline_h).astype(np.int64) - 1, 0, N_BUCKETS - 1)


@functools.lru_cache(maxsize=4)
def _base_arrivals(step_minutes: int) -> dict[str, np.ndarray]:
    """Batches of the base scenario over the calendar year: [N_DAYS, steps_per_day, C] arrays."""
    rng = np.random.default_rng(WORKLOAD_SEED)
    steps = 24 * 60 // step_minutes
    dt_h = step_minutes / 60.0
    start_h = np.arange(steps) * dt_h
    weekly = np.asarray(WEEKLY_FACTOR)[calendar.day_types()]  # [N_DAYS]
    jobs, gpuh, slack = [], [], []
    for job in JOB_CLASSES:
        diurnal = 1.0 + job.diurnal_amplitude * np.cos(
            2.0 * np.pi * (start_h + dt_h / 2 - DIURNAL_PEAK_HOUR) / 24.0
        )
        rate = job.jobs_per_day / steps * weekly[:, None] * diurnal[None, :]
        counts = rng.poisson(rate)  # [N_DAYS, steps]
        sizes = rng.lognormal(np.log(job.size_median_gpuh), job.size_sigma, counts.sum())
        sizes = np.clip(sizes, job.size_min_gpuh, job.size_max_gpuh)
        owner = np.repeat(np.arange(counts.size), counts.ravel())
        jobs.append(counts)
        gpuh.append(np.bincount(owner, weights=sizes, minlength=counts.size).reshape(counts.shape))
        slack.append(rng.uniform(job.slack_min_h, job.slack_max_h, counts.shape))
    return {
        "jobs": np.stack(jobs, axis=-1),
        "gpuh": np.stack(gpuh, axis=-1),
        "deadline_h": start_h[None, :, None] + np.stack(slack, axis=-1),
        "slack_h": np.stack(slack, axis=-1),
    }


def _left_at_midnight(gpuh: np.ndarray, deadline_h: np.ndarray, slack_h: np.ndarray) -> np.ndarray:
    """Work of each batch [N_DAYS, steps, C] still left at the day's end under uniform progress."""
    late_h = deadline_h - HOURS_PER_DAY
    return np.where(late_h > 0.0, gpuh * np.clip(late_h / slack_h, 0.0, 1.0), 0.0)


def _carry_over(gpuh: np.ndarray, deadline_h: np.ndarray, slack_h: np.ndarray) -> np.ndarray:
    """Initial queue [N_DAYS, C, N_BUCKETS] of each day from the previous day's late-due batches."""
    prev = np.roll(np.arange(calendar.N_DAYS), 1)  # day 0's previous day wraps to 31 December
    late_h = deadline_h[prev] - HOURS_PER_DAY  # deadline in the new day's hours
    remaining = _left_at_midnight(gpuh[prev], deadline_h[prev], slack_h[prev])
    n_classes = gpuh.shape[-1]
    out = np.zeros((calendar.N_DAYS, n_classes, N_BUCKETS))
    day = np.arange(calendar.N_DAYS)[:, None, None]
    cls = np.arange(n_classes)[None, None, :]
    np.add.at(
        out,
        (
            np.broadcast_to(day, remaining.shape),
            np.broadcast_to(cls, remaining.shape),
            _hourly_bucket(late_h),
        ),
        remaining,
    )
    return out


def _with_wrap_day(per_day: np.ndarray) -> np.ndarray:
    """Append 1 January again (wrap-around day) along the leading day axis."""
    return np.concatenate([per_day, per_day[:1]], axis=0)


def _per_step(per_day: np.ndarray) -> np.ndarray:
    """[N_DAYS, steps, C] -> [(N_DAYS + 1) * steps + 1, C]: wrap-around day, then a zero row."""
    flat = _with_wrap_day(per_day).reshape(-1, per_day.shape[-1])
    return np.concatenate([flat, np.zeros_like(flat[:1])])


@functools.lru_cache(maxsize=8)
def get_workload(scenario: str = "base", step_minutes: int = 5) -> Workload:
    """Job arrivals of ``scenario`` at ``step_minutes`` resolution (a divisor of 60), cached per
    process."""
    if scenario not in WORKLOAD_SCENARIOS:
        raise ValueError(
            f"unknown workload scenario {scenario!r}; valid: {', '.join(WORKLOAD_SCENARIOS)}"
        )
    if step_minutes < 1 or 60 % step_minutes:
        raise ValueError(f"step_minutes must divide 60, got {step_minutes}")
    raw = _base_arrivals(step_minutes)
    factor = SHOCK_FACTOR if scenario == "workload_shock" else 1.0
    gpuh, jobs = raw["gpuh"] * factor, raw["jobs"] * int(factor)
    gpuh = gpuh.astype(np.float32).astype(np.float64)  # float32-representable (see Workload)
    steps_per_hour = 60 // step_minutes
    due = (np.arange(N_BUCKETS) + 1) * steps_per_hour
    due[-1] = HOURS_PER_DAY * steps_per_hour  # checked against the carry allowance at the day's end
    bucket = _hourly_bucket(raw["deadline_h"])
    carry = np.where(
        bucket == N_BUCKETS - 1, _left_at_midnight(gpuh, raw["deadline_h"], raw["slack_h"]), 0.0
    )
    step_gpuh, step_bucket = _per_step(gpuh), _per_step(bucket)
    later = np.arange(N_BUCKETS) >= step_bucket[:, :, None]
    arrays = {
        "arrival_gpuh": step_gpuh,
        "arrival_cum_gpuh": np.where(
            later, step_gpuh[:, :, None].astype(np.float32), np.float32(0.0)
        ),
        "arrival_jobs": _per_step(jobs),
        "arrival_bucket": step_bucket,
        "arrival_carry_gpuh": _per_step(carry),
        "initial_queue_gpuh": _with_wrap_day(_carry_over(gpuh, raw["deadline_h"], raw["slack_h"])),
        "bucket_due_step": due,
    }
    for value in arrays.values():
        value.setflags(write=False)
    return Workload(
        scenario=scenario,
        step_minutes=step_minutes,
        steps_per_day=24 * 60 // step_minutes,
        class_names=tuple(job.name for job in JOB_CLASSES),
        **arrays,
    )
