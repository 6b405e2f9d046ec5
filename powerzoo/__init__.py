"""PowerZoo: reinforcement-learning tasks on power systems.

``powerzoo.rl.make_env(task, ...)`` builds an env; ``powerzoo.tasks.list_tasks()`` lists tasks.
Importing the package registers its Gymnasium ids (``powerzoo/BatteryArbitrage-v0``, ...).
"""

from __future__ import annotations

__version__ = "0.1.0"

from powerzoo.envs.registration import register_envs as _register_envs

_register_envs()

__all__ = ["__version__"]
