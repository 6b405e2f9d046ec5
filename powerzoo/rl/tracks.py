"""Compute tracks: the same training allowance for every algorithm, and the record of what ran.

Two tracks, so that algorithms are compared at equal compute rather than at equal env steps (an
off-policy learner spends far more time per env step than PPO; a fast learner can take many more
steps in the same time):

* ``S``: a wall-clock allowance of :data:`S_WALL_CLOCK_S` seconds (5 minutes) on one reference
  core. The campaign trial runs with one torch and one BLAS thread; training stops when the
  allowance is spent (the :class:`~powerzoo.rl.conditions.WallClock` stop condition, honoured
  by the SB3 trainer after every env step and the native MAPPO / IPPO / PPO-L trainer after every
  rollout). ``total_timesteps`` is set to :data:`L_ENV_STEPS` as a cap that a 5-minute run does
  not reach, so a learning-rate schedule that decays over ``total_timesteps`` barely decays:
  tune the schedule on the track (:mod:`powerzoo.rl.campaigns.tuning`).
* ``L``: :data:`L_ENV_STEPS` env steps (10 million), or :data:`L_WALL_CLOCK_S` seconds (one
  hour, e.g. one GPU-hour) of wall clock, whichever comes first.

A track is named in a campaign file (``track: S`` at the top, or in one setting) or given as a
mapping with another allowance for a smoke run (``track: {name: S, wall_clock_s: 2}``); the
trial records mark such an allowance as not the standard one. ``clock: cpu`` in the mapping
counts the seconds in the trial process's CPU time instead (the
:class:`~powerzoo.rl.conditions.CpuTime` condition): on a dedicated core the two are the same
allowance, and on a machine that other work also loads (a 2-core workstation running the
campaign beside the developer's tests) each trial still gets its full five minutes of one core;
it is still the standard track. Every trial records its track, env
steps, wall and CPU time and the hardware it ran on (:func:`compute_record`).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "Track",
    "TRACKS",
    "S_WALL_CLOCK_S",
    "L_ENV_STEPS",
    "L_WALL_CLOCK_S",
    "CLOCKS",
    "resolve_track",
    "apply_track",
    "on_a_clock",
    "hardware_info",
    "numeric_kernels",
    "compute_record",
    "Stopwatch",
]

S_WALL_CLOCK_S = 300.0
"""Track S: seconds of wall clock on one reference core (5 minutes)."""
L_ENV_STEPS = 10_000_000
"""Track L: env steps (summed over parallel envs); also track S's step cap."""
L_WALL_CLOCK_S = 3600.0
"""Track L: seconds of wall clock (one hour, e.g. one GPU-hour), if reached before the steps."""


@dataclasses.dataclass(frozen=True)
class Track:
    """One compute track: its name and allowance.

    Attributes:
        name: ``"S"`` or ``"L"``.
        wall_clock_s: Seconds of wall clock training may take.
        max_env_steps: Env steps training may take (the run's ``total_timesteps``).
        standard: Whether the allowance is the track's published one (a smoke run's shorter
            allowance is not).
        clock: What the seconds count: ``"wall"`` (wall clock, the
            :class:`~powerzoo.rl.conditions.WallClock` condition) or ``"cpu"`` (the trial
            process's CPU time, :class:`~powerzoo.rl.conditions.CpuTime`: the same allowance on
            a dedicated core, and the same compute on a machine other work also loads).
    """

    name: str
    wall_clock_s: float
    max_env_steps: int
    standard: bool = True
    clock: str = "wall"

    def to_dict(self) -> dict[str, Any]:
        """The track as a plain dict (the trial record's ``track_budget``)."""
        return dataclasses.asdict(self)


TRACKS: dict[str, Track] = {
    "S": Track("S", S_WALL_CLOCK_S, L_ENV_STEPS),
    "L": Track("L", L_WALL_CLOCK_S, L_ENV_STEPS),
}
"""The published tracks by name."""


CLOCKS: dict[str, str] = {"wall": "wall_clock", "cpu": "cpu_time"}
"""What a track's seconds may count, and the stop condition type that counts them."""


def resolve_track(value: Any) -> Track | None:
    """The track a campaign or tuner names: ``None``, a name (``"S"``, ``"L"``, any case) or a
    mapping ``{name, wall_clock_s, max_env_steps, clock}`` with a smaller allowance (a smoke
    run) or its seconds counted in CPU time (``clock: cpu``); ``ValueError`` (one line) for
    anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        track = TRACKS.get(value.upper())
        if track is None:
            raise ValueError(f"unknown track {value!r}; valid: {', '.join(TRACKS)}")
        return track
    if not isinstance(value, Mapping):
        raise ValueError(f"a track is a name ({', '.join(TRACKS)}) or a mapping, got {value!r}")
    unknown = sorted(set(value) - {"name", "wall_clock_s", "max_env_steps", "clock"})
    if unknown:
        raise ValueError(
            f"track: unknown key(s) {', '.join(unknown)}; "
            "valid: name, wall_clock_s, max_env_steps, clock"
        )
    base = resolve_track(value.get("name"))
    if base is None:
        raise ValueError("track: a mapping needs 'name' (S or L)")
    seconds = value.get("wall_clock_s", base.wall_clock_s)
    steps = value.get("max_env_steps", base.max_env_steps)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"track: wall_clock_s must be a positive number, got {seconds!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"track: max_env_steps must be a positive integer, got {steps!r}")
    if seconds > base.wall_clock_s or steps > base.max_env_steps:
        raise ValueError(
            f"track {base.name}: an allowance above the track's ({base.wall_clock_s:g} s, "
            f"{base.max_env_steps:,} env steps) is another track"
        )
    clock = value.get("clock", base.clock)
    if clock not in CLOCKS:
        raise ValueError(f"track: clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    standard = (float(seconds), int(steps)) == (base.wall_clock_s, base.max_env_steps)
    return Track(base.name, float(seconds), int(steps), standard, clock)


def on_a_clock(stop_conditions: Any) -> bool:
    """Whether a run config's ``stop_conditions`` hold a timer (a track's ``wall_clock`` or
    ``cpu_time``): its ``total_timesteps`` is then a cap the timer ends training before, not a
    budget to round to whole rollouts."""
    timers = set(CLOCKS.values())
    return any(getattr(c, "get", lambda _: None)("type") in timers for c in stop_conditions or [])


def apply_track(config: dict[str, Any], track: Track) -> dict[str, Any]:
    """A run-config dict trained on ``track``: ``total_timesteps`` = the track's env steps (no
    ``episodes``) and a ``wall_clock`` (or, with ``clock: cpu``, ``cpu_time``) stop condition of
    its seconds, replacing any timer the config had; the other stop conditions stay. Every
    trainer honours the timer (the SB3 multi-agent one in its shared-policy loop, which is what
    ``train()`` runs).

    Args:
        config: A run-config dict (:class:`~powerzoo.rl.config.TrainConfig` fields).
        track: The track.

    Returns:
        A new dict.
    """
    timers = set(CLOCKS.values())
    kept = [c for c in config.get("stop_conditions") or [] if c.get("type") not in timers]
    timer = {"type": CLOCKS[track.clock], "seconds": float(track.wall_clock_s)}
    return {
        **config,
        "total_timesteps": int(track.max_env_steps),
        "episodes": None,
        "stop_conditions": [*kept, timer],
    }


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :mod:`platform`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _blas_threads() -> dict[str, int]:
    """Threads of each BLAS / OpenMP library loaded now (``threadpoolctl``)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - installed with numpy's stack here
        return {}
    return {
        f"{info.get('internal_api', '?')}:{os.path.basename(str(info.get('filepath', '?')))}": int(
            info.get("num_threads", 0)
        )
        for info in threadpool_info()
    }


def numeric_kernels() -> dict[str, Any]:
    """What fixes a computation's last bits and much of its speed besides the code: numpy's and
    scipy's versions, the vector instructions numpy dispatches to (``simd``: its AVX-512 and
    AVX2 loops round ``exp`` or ``sin`` differently) and the kernels of every loaded BLAS
    (``blas_kernels``, as threadpoolctl reports them: OpenBLAS's ``Haswell`` and ``SkylakeX``
    kernels sum a product in another order)."""
    import numpy as np
    import scipy
    import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so that it is listed)

    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__
    try:
        from threadpoolctl import threadpool_info

        libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    except ImportError:  # pragma: no cover - installed with numpy's stack here
        libs = []
    return {
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "simd": sorted(
            k for k, on in __cpu_features__.items() if on and k.startswith(("AVX", "FMA"))
        ),
        "blas_kernels": sorted(
            {f"{lib['internal_api']}:{lib.get('architecture')}" for lib in libs}
        ),
    }


def hardware_info(torch_device: str = "cpu") -> dict[str, Any]:
    """What a run ran on: CPU model, logical cores of the machine and cores this process may use,
    the torch device and threads, the BLAS threads, the GPU (if torch sees one), the platform,
    and the numeric kernels (:func:`numeric_kernels`: machines of one CPU name may differ in
    them, and in speed).

    Args:
        torch_device: The device the run's networks were on (``"cpu"`` for the SB3 trainers; the
            native trainers' ``device`` setting).

    Returns:
        A JSON-ready dict.
    """
    import torch

    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        usable = os.cpu_count() or 1
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "torch_device": str(torch_device),
        "torch_threads": int(torch.get_num_threads()),
        "blas_threads": _blas_threads(),
        "gpu": gpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        **numeric_kernels(),
    }


class Stopwatch:
    """Wall and CPU seconds of this process since it was made (``time.perf_counter`` and
    ``time.process_time``)."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()

    def wall_s(self) -> float:
        """Wall-clock seconds since the stopwatch was made."""
        return time.perf_counter() - self.wall0

    def cpu_s(self) -> float:
        """CPU seconds (user + system, every thread of the process) since it was made."""
        return time.process_time() - self.cpu0


def compute_record(
    track: Track | None,
    env_steps: int,
    watch: Stopwatch,
    algorithm_kwargs: Mapping[str, Any] | None = None,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """The compute fields of a trial or tuning record: the track (name, allowance; ``None``:
    a plain step budget), env steps trained, wall and CPU seconds of training, why it stopped,
    and :func:`hardware_info`.

    Args:
        track: The track trained on, or ``None``.
        env_steps: Env steps trained (summed over parallel envs).
        watch: The stopwatch started when training started.
        algorithm_kwargs: The run's ``algorithm_kwargs`` (its ``device`` names the torch device
            of the native trainers).
        stop_reason: The trainer's stop reason (``None``: the step budget was reached).

    Returns:
        A JSON-ready dict.
    """
    wall, cpu = watch.wall_s(), watch.cpu_s()
    device = str((algorithm_kwargs or {}).get("device", "cpu"))
    return {
        "track": None if track is None else track.name,
        "track_budget": None if track is None else track.to_dict(),
        "env_steps": int(env_steps),
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "env_steps_per_s": env_steps / wall if wall > 0 else None,
        "stop_reason": stop_reason,
        "hardware": hardware_info(device),
    }
