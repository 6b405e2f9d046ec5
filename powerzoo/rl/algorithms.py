"""Training algorithms by name, their keyword arguments, and task-aware defaults.

This is the one algorithm registry of the training layer: :func:`~powerzoo.rl.trainer.Trainer`
and the run config accept every name in :data:`ALL_ALGORITHMS`: the Stable-Baselines3 ones
(:data:`ALGORITHMS`; the multi-agent loops of :mod:`powerzoo.rl.sb3.marl` accept the subset
:data:`MULTI_AGENT_ALGORITHMS`) and the native PPO family of :mod:`powerzoo.rl.mappo`
(:data:`NATIVE_MARL_ALGORITHMS` on multi-agent tasks, :data:`NATIVE_SINGLE_AGENT_ALGORITHMS` on
single-agent ones), and the reference baselines of :mod:`powerzoo.rl.reference`
(:data:`REFERENCE_ALGORITHMS`: one of those learners behind the rule or a safety layer, or
started from behaviour cloning).

An SB3 algorithm class from outside PowerZoo is named by its entry point,
``"package.module:Class"`` (:mod:`powerzoo.rl.entry_points`), and trained as SB3's own are.

torch and SB3 are imported only when an algorithm class is asked for, so importing
:mod:`powerzoo.rl` stays cheap.
"""

from __future__ import annotations

import dataclasses
import decimal
import importlib
import math
from collections.abc import Sequence
from typing import Any

from powerzoo.rl.entry_points import (
    algorithm_label,
    entry_point_class,
    init_parameters,
    is_entry_point,
)

__all__ = [
    "ALGORITHMS",
    "ON_POLICY",
    "algorithm_label",
    "entry_point_class",
    "is_entry_point",
    "is_on_policy",
    "MULTI_AGENT_ALGORITHMS",
    "algorithm_class",
    "canonical_algorithm",
    "check_algorithm_kwargs",
    "trainer_class",
    "NATIVE_MARL_ALGORITHMS",
    "NATIVE_SINGLE_AGENT_ALGORITHMS",
    "ALL_ALGORITHMS",
    "is_native_marl",
    "is_native",
    "algorithms_for",
    "exact_number",
    "numbers_in_kwargs",
    "REFERENCE_ALGORITHMS",
    "REFERENCE_KWARGS",
    "ReferenceAlgorithm",
    "reference_algorithm",
    "base_algorithm",
    "split_reference_kwargs",
]


@dataclasses.dataclass(frozen=True)
class _Algorithm:
    module: str
    cls: str
    on_policy: bool
    multi_agent: bool  # accepted by the multi-agent loops (powerzoo.rl.sb3.marl)


_REGISTRY: dict[str, _Algorithm] = {
    "PPO": _Algorithm("stable_baselines3", "PPO", on_policy=True, multi_agent=True),
    "A2C": _Algorithm("stable_baselines3", "A2C", on_policy=True, multi_agent=True),
    "SAC": _Algorithm("stable_baselines3", "SAC", on_policy=False, multi_agent=True),
    "TD3": _Algorithm("stable_baselines3", "TD3", on_policy=False, multi_agent=True),
    "DDPG": _Algorithm("stable_baselines3", "DDPG", on_policy=False, multi_agent=False),
}
ALGORITHMS: tuple[str, ...] = tuple(_REGISTRY)
"""The Stable-Baselines3 algorithms (names are case-insensitive)."""
NATIVE_MARL_ALGORITHMS: tuple[str, ...] = ("MAPPO", "IPPO", "MAPPO-L", "IPPO-L")
"""The native multi-agent PPO family (:mod:`powerzoo.rl.mappo`): centralised critic (MAPPO) or
local critics (IPPO), ``-L`` with Lagrangian cost budgets."""
NATIVE_SINGLE_AGENT_ALGORITHMS: tuple[str, ...] = ("PPO-L",)
"""The native trainer on single-agent tasks (the task's one agent): ``PPO-L``, PPO with a cost
critic and one Lagrange multiplier per selected cost against the task's per-episode budgets."""


@dataclasses.dataclass(frozen=True)
class ReferenceAlgorithm:
    """A reference baseline: the algorithm ``base`` trains a learner that acts through ``layer``
    (``"residual"``: the rule plus the learner's residual; ``"safe"``: the learner's action
    projected onto the step's declared bounds; ``None``: the env's own action), first fitted to
    the oracle's actions when ``behaviour_cloning`` (:mod:`powerzoo.rl.reference`)."""

    base: str
    layer: str | None
    behaviour_cloning: bool = False


_REFERENCE: dict[str, ReferenceAlgorithm] = {
    "PPO-RESIDUAL": ReferenceAlgorithm("PPO", "residual"),
    "SAC-RESIDUAL": ReferenceAlgorithm("SAC", "residual"),
    "PPO-SAFE": ReferenceAlgorithm("PPO", "safe"),
    "BC-PPO": ReferenceAlgorithm("PPO", None, behaviour_cloning=True),
    "MAPPO-RESIDUAL": ReferenceAlgorithm("MAPPO", "residual"),
    "MAPPO-SAFE": ReferenceAlgorithm("MAPPO", "safe"),
}
REFERENCE_ALGORITHMS: tuple[str, ...] = tuple(_REFERENCE)
"""The reference baselines (:mod:`powerzoo.rl.reference`): ``PPO-RESIDUAL`` / ``SAC-RESIDUAL`` /
``MAPPO-RESIDUAL`` (a residual on the task's rule), ``PPO-SAFE`` / ``MAPPO-SAFE`` (a safety layer
onto the step's declared bounds), ``BC-PPO`` (behaviour cloning of the oracle, then PPO)."""
REFERENCE_KWARGS: dict[str, dict[str, type]] = {
    "residual": {"residual_scale": float},
    "behaviour_cloning": {
        "bc_dataset": str,
        "bc_episodes": int,
        "bc_epochs": int,
        "bc_learning_rate": float,
    },
}
"""The ``algorithm_kwargs`` a reference baseline takes besides its base algorithm's, by kind."""


def reference_algorithm(name: str) -> ReferenceAlgorithm | None:
    """The reference baseline ``name`` (any case) is, or ``None`` for any other name."""
    return _REFERENCE.get(name.upper()) if isinstance(name, str) else None


def evaluates_at_start(name: str, at_start: bool | None = None) -> bool:
    """Whether a run of algorithm ``name`` evaluates its untrained model too (a row at step 0 of
    the evaluation log, a candidate for the best model): ``at_start`` (``evaluation.at_start``)
    when set, else only where the untrained model is a controller, so that model selection can
    fall back on it: the residual baselines (the rule) and behaviour cloning (the clone)."""
    if at_start is not None:
        return bool(at_start)
    reference = reference_algorithm(name)
    return reference is not None and (reference.layer == "residual" or reference.behaviour_cloning)


def base_algorithm(name: str) -> str:
    """The algorithm that trains ``name``'s learner: the base of a reference baseline, else
    ``name`` upper-cased."""
    reference = reference_algorithm(name)
    return reference.base if reference is not None else str(name).upper()


def _reference_keys(reference: ReferenceAlgorithm) -> dict[str, type]:
    keys: dict[str, type] = {}
    if reference.layer == "residual":
        keys.update(REFERENCE_KWARGS["residual"])
    if reference.behaviour_cloning:
        keys.update(REFERENCE_KWARGS["behaviour_cloning"])
    return keys


def split_reference_kwargs(
    name: str, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(reference keywords, base algorithm keywords)`` of ``kwargs`` for algorithm ``name``
    (no reference keywords for other names).

    Args:
        name: Algorithm name (any case).
        kwargs: The ``algorithm_kwargs``.

    Returns:
        Two new dicts.
    """
    reference = reference_algorithm(name)
    keys = {} if reference is None else _reference_keys(reference)
    own = {k: v for k, v in kwargs.items() if k in keys}
    return own, {k: v for k, v in kwargs.items() if k not in keys}


ON_POLICY: frozenset[str] = frozenset(k for k, v in _REGISTRY.items() if v.on_policy) | frozenset(
    k for k, v in _REFERENCE.items() if v.base in _REGISTRY and _REGISTRY[v.base].on_policy
)
MULTI_AGENT_ALGORITHMS: tuple[str, ...] = tuple(k for k, v in _REGISTRY.items() if v.multi_agent)
"""The subset the multi-agent loops accept (``PPO, A2C, SAC, TD3``: DDPG is not offered there)."""
ALL_ALGORITHMS: tuple[str, ...] = (
    ALGORITHMS + NATIVE_MARL_ALGORITHMS + NATIVE_SINGLE_AGENT_ALGORITHMS + REFERENCE_ALGORITHMS
)
"""What ``Trainer`` and the run config accept: the SB3 algorithms, the native PPO family
(``MAPPO``, ``IPPO``, ``MAPPO-L``, ``IPPO-L`` on multi-agent tasks, ``PPO-L`` on single-agent
ones; :mod:`powerzoo.rl.mappo`) and the reference baselines (:data:`REFERENCE_ALGORITHMS`)."""

# The trainer class of each family, imported when a trainer is built: the run config builds its
# trainer through this table, so the config never imports a trainer module.
_TRAINERS = {
    "sb3": "powerzoo.rl.sb3.trainer:SB3Trainer",
    "sb3_multi_agent": "powerzoo.rl.sb3.multi_agent:SB3MultiAgentTrainer",
    "native": "powerzoo.rl.mappo.trainer:MAPPOTrainer",
    "reference_sb3": "powerzoo.rl.reference.sb3_trainer:ReferenceSB3Trainer",
    "reference_native": "powerzoo.rl.reference.mappo_trainer:ReferenceMAPPOTrainer",
}
# Arguments the trainer sets itself; a config may not pass them through ``algorithm_kwargs``.
_RESERVED = frozenset({"env", "policy", "seed", "tensorboard_log", "verbose", "_init_setup_model"})


# Ranges of the common SB3 hyperparameters: (low, high, low inclusive, high inclusive); None is
# unbounded. A value of another kind (a schedule for learning_rate, "auto" for SAC's ent_coef, a
# (n, "step") tuple for train_freq) is left to SB3; ints must be whole numbers.
_BOUNDS: dict[str, tuple[float | None, float | None, bool, bool]] = {
    "gamma": (0.0, 1.0, False, True),
    "gae_lambda": (0.0, 1.0, True, True),
    "learning_rate": (0.0, None, False, False),
    "n_steps": (1, None, True, False),
    "batch_size": (1, None, True, False),
    "n_epochs": (1, None, True, False),
    "clip_range": (0.0, None, False, False),
    "ent_coef": (0.0, None, True, False),
    "vf_coef": (0.0, None, True, False),
    "max_grad_norm": (0.0, None, False, False),
    "target_kl": (0.0, None, False, False),
    "buffer_size": (1, None, True, False),
    "learning_starts": (0, None, True, False),
    "tau": (0.0, 1.0, False, True),
    "train_freq": (1, None, True, False),
    "gradient_steps": (-1, None, True, False),
    "policy_delay": (1, None, True, False),
    "target_policy_noise": (0.0, None, True, False),
    "target_noise_clip": (0.0, None, True, False),
}
_INTEGERS = frozenset(
    {"n_steps", "batch_size", "n_epochs", "buffer_size", "learning_starts", "train_freq",
     "gradient_steps", "policy_delay"}
)  # fmt: skip


# keys of _BOUNDS that SB3 also takes as text ("auto" or "auto_0.1" for SAC's ent_coef)
_TEXT_ALLOWED = frozenset({"ent_coef"})
# field types of the native trainer's parameters (MAPPOParams) that hold a number
_NUMERIC_TYPES = frozenset({"int", "float", "float | None", "int | None"})


def exact_number(value: Any) -> Any:
    """``value`` as a number when it is a string that writes one exactly (``"1e6"``,
    ``"3e-4"``, ``"100_000"``), else unchanged.

    YAML 1.1, which ``yaml.safe_load`` reads, takes ``1e6`` and ``3e-4`` (no dot) for strings. A
    whole number becomes an ``int``, any other a ``float``.
    """
    if not isinstance(value, str):
        return value
    text = value.strip().replace("_", "")
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return value
    if not text or not number.is_finite():
        return value
    if number == number.to_integral_value():
        return int(number)
    return float(number)


def _numeric_keys(name: str) -> frozenset[str]:
    """The keyword arguments of algorithm ``name`` that only take numbers."""
    reference = reference_algorithm(name)
    if reference is not None:
        own = {k for k, kind in _reference_keys(reference).items() if kind is not str}
        return frozenset(own) | _numeric_keys(reference.base)
    if is_native(name):
        params = importlib.import_module("powerzoo.rl.mappo.hparams").MAPPOParams
        return frozenset(
            f.name for f in dataclasses.fields(params) if str(f.type) in _NUMERIC_TYPES
        )
    return frozenset(_BOUNDS) - _TEXT_ALLOWED


def numbers_in_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the exact numeric strings of algorithm ``name``'s numeric arguments as
    numbers (``learning_rate: 3e-4`` in YAML is the string ``"3e-4"``); other values unchanged.

    Args:
        name: Algorithm name (any case).
        kwargs: The ``algorithm_kwargs``.

    Returns:
        A new dict.
    """
    try:
        numeric = _numeric_keys(name)
    except (ImportError, ValueError):
        return dict(kwargs)
    return {k: exact_number(v) if k in numeric else v for k, v in kwargs.items()}


def _bound_problem(key: str, value: Any) -> str | None:
    """Why ``value`` is out of ``key``'s range (``None`` if it is in range or not a number)."""
    low, high, low_in, high_in = _BOUNDS[key]
    value = exact_number(value)
    if isinstance(value, str) and key not in _TEXT_ALLOWED:
        return f"must be a number, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if key in _INTEGERS and value != int(value):
        return f"must be a whole number, got {value!r}"
    below = low is not None and (value < low if low_in else value <= low)
    above = high is not None and (value > high if high_in else value >= high)
    if below or above:
        if high is None:
            span = f">= {low:g}" if low_in else f"> {low:g}"
        else:
            span = f"in {'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
        return f"must be {span}, got {value!r}"
    if key == "gradient_steps" and value == 0:
        return "must be >= 1 (or -1: as many as env steps collected), got 0"
    return None


def is_native_marl(name: str) -> bool:
    """Whether ``name`` (any case) is one of the native multi-agent algorithms (no SB3 class),
    or a reference baseline trained by one."""
    return isinstance(name, str) and base_algorithm(name) in NATIVE_MARL_ALGORITHMS


def is_native(name: str) -> bool:
    """Whether ``name`` (any case) trains with the native trainer (:mod:`powerzoo.rl.mappo`):
    the multi-agent family or ``PPO-L``."""
    return is_native_marl(name) or (
        isinstance(name, str) and base_algorithm(name) in NATIVE_SINGLE_AGENT_ALGORITHMS
    )


def algorithms_for(spec: Any) -> tuple[str, ...]:
    """Algorithms that fit a task spec: for single-agent tasks SB3's and, when the task selects
    costs, ``PPO-L``; for multi-agent tasks the SB3 shared / independent-learner subset and the
    native family (the ``-L`` variants need selected costs)."""
    single = spec.agent_mode != "multi"
    needs = {"residual": "rule_based"}  # the residual starts from the rule, BC from the oracle
    reference = tuple(
        name
        for name, r in _REFERENCE.items()
        if (r.base in ALGORITHMS) == single
        and needs.get(r.layer or "", "") in (*spec.baselines, "")
        and (not r.behaviour_cloning or "oracle" in spec.baselines)
    )
    if single:
        lagrangian = NATIVE_SINGLE_AGENT_ALGORITHMS if spec.selected_constraints else ()
        return ALGORITHMS + lagrangian + reference
    native = tuple(
        a for a in NATIVE_MARL_ALGORITHMS if spec.selected_constraints or not a.endswith("-L")
    )
    return native + MULTI_AGENT_ALGORITHMS + reference


def is_on_policy(name: str) -> bool:
    """Whether algorithm ``name`` learns on-policy (PPO, A2C and the reference baselines on
    them; an entry point's class if it subclasses SB3's ``OnPolicyAlgorithm``)."""
    if is_entry_point(name):
        from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

        return issubclass(entry_point_class(name), OnPolicyAlgorithm)
    return str(name).upper() in ON_POLICY


def canonical_algorithm(name: str, valid: Sequence[str] = ALGORITHMS) -> str:
    """Upper-case registered name of ``name`` (case-insensitive); an entry point
    (:func:`is_entry_point`) is returned as written (its class is checked when it is built).

    Names outside ``valid`` (default: every registered algorithm) raise ``ValueError`` listing them.
    """
    if is_entry_point(name):
        return name
    if isinstance(name, str) and name.upper() in valid:
        return name.upper()
    raise ValueError(
        f"unknown algorithm {name!r}; valid: {', '.join(valid)}, or an SB3 algorithm class from "
        "outside as 'package.module:Class'"
    )


def algorithm_class(name: str, valid: Sequence[str] = ALGORITHMS) -> type:
    """The SB3 class of algorithm ``name`` (imports SB3 and torch on first use); ``valid`` as in
    :func:`canonical_algorithm`; an entry point's class (:func:`entry_point_class`)."""
    if is_entry_point(name):
        return entry_point_class(name)
    if is_native(name):
        raise ValueError(
            f"{name.upper()} is trained by the native trainer (powerzoo.rl.mappo), not an SB3 class"
        )
    if reference_algorithm(name) is not None:
        name = base_algorithm(name)
    entry = _REGISTRY[canonical_algorithm(name, valid)]
    return getattr(importlib.import_module(entry.module), entry.cls)


def check_algorithm_kwargs(
    name: str, kwargs: dict[str, Any], where: str = "algorithm_kwargs", n_envs: int | None = None
) -> None:
    """Raise ``ValueError`` naming any key of ``kwargs`` that the SB3 constructor (or, for the
    native algorithms, :class:`~powerzoo.rl.mappo.hparams.MAPPOParams`) does not
    take, or whose value is out of its range (``gamma`` in (0, 1], ``gae_lambda`` in [0, 1],
    ``n_steps`` / ``batch_size`` / ``n_epochs`` >= 1, ``learning_rate`` > 0, ...).

    With ``n_envs``, PPO's rollout (``n_steps`` × ``n_envs`` env steps) and ``batch_size`` must
    be over 1 (SB3 normalises advantages over them). A reference baseline takes its own keys
    (:data:`REFERENCE_KWARGS`) and its base algorithm's.
    """
    reference = reference_algorithm(name)
    if reference is not None:
        own, kwargs = split_reference_kwargs(name, kwargs)
        _check_reference_kwargs(own, _reference_keys(reference), where)
        name = reference.base
    if is_native(name):  # MAPPOParams checks them (imported here: it is the mappo wing's)
        numeric = _numeric_keys(name)
        for key, value in kwargs.items():
            value = exact_number(value)
            if key in numeric and isinstance(value, str):
                raise ValueError(f"{where}.{key}: must be a number, got {value!r}")
        check_params = importlib.import_module("powerzoo.rl.mappo.hparams").check_params
        check_params(numbers_in_kwargs(name, kwargs), where)
        return
    params = init_parameters(algorithm_class(name))
    valid = sorted(p for p in params if p not in _RESERVED and p != "self")
    for key in kwargs:
        if key in _RESERVED:
            raise ValueError(
                f"{where}.{key}: set by the trainer (use the config's own field for it)"
            )
        if key not in params:
            raise ValueError(
                f"{where}.{key}: not an argument of {canonical_algorithm(name)}; "
                f"valid: {', '.join(valid)}"
            )
        problem = _bound_problem(key, kwargs[key]) if key in _BOUNDS else None
        if problem is not None:
            raise ValueError(f"{where}.{key}: {problem}")
    if canonical_algorithm(name) == "PPO" and kwargs.get("normalize_advantage", True):
        n_steps, batch = kwargs.get("n_steps", 2048), kwargs.get("batch_size", 64)
        if n_envs is not None and isinstance(n_steps, int) and n_steps * n_envs < 2:
            raise ValueError(
                f"{where}.n_steps: PPO normalises advantages over n_steps × n_envs = "
                f"{n_steps * n_envs} step; give n_steps >= 2 (or n_envs >= 2)"
            )
        if isinstance(batch, int) and batch < 2:
            raise ValueError(
                f"{where}.batch_size: PPO normalises advantages over each mini-batch; "
                f"give batch_size >= 2, got {batch}"
            )


def _check_reference_kwargs(own: dict[str, Any], keys: dict[str, type], where: str) -> None:
    """``ValueError`` naming a reference keyword of the wrong kind or out of range."""
    for key, value in own.items():
        kind = keys[key]
        value = exact_number(value) if kind is not str else value
        if kind is str:
            ok = isinstance(value, str) and bool(value)
        else:
            ok = (
                not isinstance(value, bool)
                and isinstance(value, (int, float))
                and math.isfinite(value)
                and value > 0
                and (kind is float or value == int(value))
            )
        if not ok:
            what = "a file path" if kind is str else f"a positive {kind.__name__}"
            raise ValueError(f"{where}.{key}: must be {what}, got {value!r}")


def trainer_class(name: str, multi_agent: bool) -> type:
    """The trainer class for algorithm ``name`` on a single- or multi-agent task.

    The native family (``MAPPO``, ``IPPO``, ``-L``, and ``PPO-L`` on single-agent tasks) trains
    with :class:`~powerzoo.rl.mappo.trainer.MAPPOTrainer`; the SB3 algorithms with
    :class:`~powerzoo.rl.sb3.trainer.SB3Trainer` on single-agent tasks and
    :class:`~powerzoo.rl.sb3.multi_agent.SB3MultiAgentTrainer` on multi-agent ones; the
    reference baselines with :class:`~powerzoo.rl.reference.sb3_trainer.ReferenceSB3Trainer`
    (SB3 bases, single-agent tasks) or
    :class:`~powerzoo.rl.reference.mappo_trainer.ReferenceMAPPOTrainer` (native bases,
    multi-agent tasks).
    """
    reference = reference_algorithm(name)
    if reference is not None:
        if (reference.base in ALGORITHMS) == multi_agent:
            fit = "single-agent" if multi_agent else "multi-agent"
            raise ValueError(f"{name.upper()} trains {fit} tasks only")
        family = "reference_native" if multi_agent else "reference_sb3"
    else:
        family = "native" if is_native(name) else "sb3_multi_agent" if multi_agent else "sb3"
    module, cls = _TRAINERS[family].split(":")
    return getattr(importlib.import_module(module), cls)
