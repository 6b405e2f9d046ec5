"""A submission folder written from the trial records of a PowerZoo campaign
(:func:`submission_from_trials`): one trial per seed of one task and algorithm/setting, with
the code, machine and compute track each trial recorded (:mod:`powerzoo.benchmarks.submission`
gives the folder's format).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.submission import write_submission
from powerzoo.provenance import short_commit

__all__ = ["NOT_RECORDED_TUNING", "hardware_text", "kernels_text", "submission_from_trials"]

NOT_RECORDED_TUNING = "not recorded (a PowerZoo campaign preset)"
"""The ``tuning_budget`` of a folder written from campaign trials when none is given."""


def submission_from_trials(
    trial_dirs: Sequence[str | Path],
    folder: str | Path,
    tuning_budget: Any = NOT_RECORDED_TUNING,
) -> Path:
    """Write a submission folder from the trial records (``trial.json``) of a PowerZoo campaign:
    one trial per seed of the same task, algorithm and setting. The episodes keep the env seeds
    the campaign ran (``env_seeds = "campaign"``, module docstring, or ``"protocol"`` for a
    campaign that tested every trial on the baselines' env seeds); ``code_hash`` names the
    code each seed ran (:func:`_code_hash_text`), ``hardware`` the trial's record of its machine
    (trials of a campaign run before compute tracks say it is not recorded), and
    ``tuning_budget`` is ``tuning_budget`` (default: not recorded).

    Args:
        trial_dirs: Trial folders (each with ``trial.json``).
        folder: The submission folder to write.
        tuning_budget: How the settings were chosen (text or a mapping, ``meta.json``'s field).

    Returns:
        The folder.
    """
    records = []
    for trial in trial_dirs:
        path = Path(trial) / "trial.json"
        if not path.is_file():
            raise FileNotFoundError(f"no trial record at {path}")
        records.append(json.loads(path.read_text(encoding="utf-8")))
    if not records:
        raise ValueError("no trial folders given")
    first = records[0]
    if any((r["task"], r["label"]) != (first["task"], first["label"]) for r in records):
        raise ValueError("the trials must be of one task and one algorithm/setting label")
    seeds = [int(r["seed"]) for r in records]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"two trials share a seed: {seeds}")
    # a campaign with env_seeds: protocol tests every trial on the baselines' env seeds
    schemes = {"protocol" if r.get("env_seeds") == "protocol" else "campaign" for r in records}
    if len(schemes) != 1:
        raise ValueError("the trials were tested on different env seed schemes")
    scheme = schemes.pop()
    meta = {
        "algorithm": first["label"],
        "task": first["task"],
        "split": first.get("split", "test"),
        "seeds": seeds,
        "code_hash": _code_hash_text(records),
        "env_steps": max(int(r["num_timesteps"]) for r in records),
        "wall_time_s": max(float(r["train_seconds"]) for r in records),
        # trials run since compute tracks exist record their machine; older ones do not
        "hardware": (
            hardware_text(first["hardware"], threads=True)
            if isinstance(first.get("hardware"), dict)
            else "not recorded (a PowerZoo campaign trial)"
        ),
        "tuning_budget": tuning_budget,
        "env_seeds": scheme,
        "notes": "written from the trial records "
        + ", ".join(f"{r['trial_id']} (config {r['config_hash']})" for r in records)
        + _track_text(records),
    }
    keep = ("episode", "day_id", "env_seed", "return", "length")
    episodes = {
        int(r["seed"]): [
            {
                **{k: e[k] for k in keep},
                **{f"cost_{n}": e[f"cost_{n}"] for n in r["cost_names"]},
            }
            for e in r["episodes"]
        ]
        for r in records
    }
    return write_submission(folder, meta, episodes)


def _track_text(records: Sequence[dict[str, Any]]) -> str:
    """``"; track S: 300 CPU-s of one core, the standard allowance"``: the compute track the
    trials ran on (:mod:`powerzoo.rl.tracks`), empty for records from before tracks."""
    budgets = {json.dumps(r.get("track_budget"), sort_keys=True) for r in records}
    if len(budgets) != 1 or not isinstance(records[0].get("track_budget"), dict):
        return "" if budgets == {"null"} else "; the trials ran on different compute tracks"
    budget = records[0]["track_budget"]
    clock = "CPU-s" if budget.get("clock") == "cpu" else "s of wall clock"
    kind = "the standard allowance" if budget.get("standard") else "NOT the standard allowance"
    cpu = max(float(r.get("cpu_seconds") or 0.0) for r in records)
    return (
        f"; track {budget.get('name')}: {budget.get('wall_clock_s'):g} {clock} of one core, "
        f"{kind} (largest training CPU time {cpu:.0f} s)"
    )


def kernels_text(hardware: dict[str, Any]) -> str:
    """``", AVX2, openblas:Haswell"``: the widest SIMD numpy used and the BLAS kernels of a
    :func:`powerzoo.rl.tracks.hardware_info` dict, for a one-line hardware description (empty
    when not recorded, as in records written before they were)."""
    simd = hardware.get("simd") or []
    wide = [f for f in ("AVX512F", "AVX2", "AVX") if f in simd][:1]
    return "".join(f", {item}" for item in [*wide, *(hardware.get("blas_kernels") or [])])


def hardware_text(hardware: Any, threads: bool = False) -> str:
    """A :func:`powerzoo.rl.tracks.hardware_info` dict as one line: ``"AMD EPYC, 2 of 2 cores
    usable, torch on cpu, AVX2"`` (with ``threads``, ``"torch on cpu with 1 thread(s)"``);
    ``"not recorded"`` when ``hardware`` is not a dict.

    Args:
        hardware: A trial record's ``hardware``.
        threads: Name the torch thread count too.
    """
    if not isinstance(hardware, dict):
        return "not recorded"
    torch = f"torch on {hardware.get('torch_device', '?')}"
    if threads:
        torch += f" with {hardware.get('torch_threads', '?')} thread(s)"
    gpu = f", GPU {hardware['gpu']}" if hardware.get("gpu") else ""
    return (
        f"{hardware.get('cpu_model', 'unknown CPU')}, {hardware.get('cpus_usable', '?')} of "
        f"{hardware.get('cpu_count', '?')} cores usable, {torch}{gpu}{kernels_text(hardware)}"
    )


def _code_hash_text(records: Sequence[dict[str, Any]]) -> str:
    """The code a submission's seeds were trained and tested with, from the trial records'
    ``code`` (:func:`powerzoo.provenance.code_provenance`): ``sources <hash> (commit <id>)``,
    followed by the seeds of each version when they differ. A trial recorded before trials kept
    their code is named by its configuration hash (``config <hash>``). An algorithm from outside
    adds its module's SHA-256 as the trial recorded it (``+ module <name> sha256 <16 hex>``)."""
    seeds_of: dict[str, list[int]] = {}
    for record in records:
        code = record.get("code")
        if isinstance(code, dict) and code.get("source_hash"):
            commit = code.get("commit")
            name = f"sources {code['source_hash']}" + (
                f" (commit {short_commit(str(commit))})" if commit else ""
            )
        else:
            name = f"config {record['config_hash']}"
        outside = record.get("algorithm_code")
        if isinstance(outside, dict):
            name += f" + module {outside.get('module')} sha256 {outside.get('sha256', '')[:16]}"
        seeds_of.setdefault(name, []).append(int(record["seed"]))
    if len(seeds_of) == 1:
        return next(iter(seeds_of))
    return "; ".join(
        f"{name}: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, sorted(seeds)))}"
        for name, seeds in seeds_of.items()
    )
