"""RL entry points: ``make_env`` (and, later, trainers and configs)."""

from powerzoo.rl import sb3_compat as _sb3_compat
from powerzoo.rl.make_env import make_env

_sb3_compat.install()

__all__ = ["make_env"]
