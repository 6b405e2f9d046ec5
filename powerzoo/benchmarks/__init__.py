"""The evaluation protocol: baseline policies, ``evaluate``, the baselines table and normalised
scores, campaign statistics and reports, offline datasets.

The public names are available at package level (``from powerzoo.benchmarks import evaluate,
RandomPolicy, DatasetGenerator, normalized_score``), each loaded on first use.
"""

from __future__ import annotations

from powerzoo.lazy import lazy_exports

_EXPORTS = {
    "evaluate": "powerzoo.benchmarks.evaluation",
    "evaluate_days": "powerzoo.benchmarks.evaluation",
    "rollout": "powerzoo.benchmarks.evaluation",
    "interquartile_mean": "powerzoo.benchmarks.evaluation",
    "Policy": "powerzoo.benchmarks.policies",
    "RandomPolicy": "powerzoo.benchmarks.policies",
    "RuleBasedPolicy": "powerzoo.benchmarks.policies",
    "OraclePolicy": "powerzoo.benchmarks.policies",
    "SB3Policy": "powerzoo.benchmarks.policies",
    "predict_action": "powerzoo.benchmarks.sb3_policy",
    "BASELINE_POLICIES": "powerzoo.benchmarks.policies",
    "make_baseline_policy": "powerzoo.benchmarks.policies",
    "normalized_score": "powerzoo.benchmarks.baselines",
    "evaluation_protocol": "powerzoo.benchmarks.baselines",
    "baseline_return": "powerzoo.benchmarks.baselines",
    "load_baselines": "powerzoo.benchmarks.baselines",
    "select_days": "powerzoo.benchmarks.baselines",
    "DatasetGenerator": "powerzoo.benchmarks.offline",
    "DatasetLoader": "powerzoo.benchmarks.offline",
    "run_campaign": "powerzoo.benchmarks.campaign",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
