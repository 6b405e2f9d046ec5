"""Generic adapters from tasks to Gymnasium / PettingZoo / vector envs, wrappers, and ``make_env``.

``from powerzoo.envs import make_env`` is loaded on first use, so ``import powerzoo`` (which
registers the Gymnasium ids from :mod:`powerzoo.envs.registration`) stays light. The env classes
that ``make_env`` returns are public too (``PowerZooEnv``, ``PowerZooVectorEnv``,
``PowerZooParallelEnv``, ``PowerZooDictEnv``, ``PowerZooMultiAgentVectorEnv``), and so are the
wrappers of :mod:`powerzoo.envs.wrappers`.
"""

from __future__ import annotations

from powerzoo.lazy import lazy_exports

_EXPORTS = {
    "make_env": "powerzoo.envs.make",
    "EnvOptions": "powerzoo.envs.make",
    "inspect_env": "powerzoo.envs.introspect",
    "PowerZooEnv": "powerzoo.envs.gym_env",
    "PowerZooVectorEnv": "powerzoo.envs.vector_env",
    "PowerZooParallelEnv": "powerzoo.envs.multi_agent",
    "PowerZooDictEnv": "powerzoo.envs.multi_agent",
    "PowerZooMultiAgentVectorEnv": "powerzoo.envs.multi_agent",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
