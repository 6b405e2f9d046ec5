"""Let SB3's ``make_vec_env`` take ``vec_env_cls="subproc"`` / ``"dummy"``, as PowerZoo's docs show.

Stable-Baselines3 expects a class there. On ``import powerzoo.rl`` we wrap
``stable_baselines3.common.env_util.make_vec_env`` so the two strings map to ``SubprocVecEnv``
and ``DummyVecEnv``; classes and ``None`` pass through untouched. If SB3 is not imported yet,
a one-shot import hook applies the wrapper when it is, so importing ``powerzoo.rl`` never pays
for torch.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

__all__ = ["install"]

_TARGET = "stable_baselines3.common.env_util"


def _patch(module: ModuleType) -> None:
    original = module.make_vec_env
    if getattr(original, "_powerzoo_compat", False):
        return

    @functools.wraps(original)
    def make_vec_env(*args: Any, vec_env_cls: Any = None, **kwargs: Any) -> Any:
        if isinstance(vec_env_cls, str):
            from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

            choices = {"subproc": SubprocVecEnv, "dummy": DummyVecEnv}
            if vec_env_cls not in choices:
                raise ValueError(
                    f"unknown vec_env_cls {vec_env_cls!r}; valid: subproc, dummy, or a VecEnv class"
                )
            vec_env_cls = choices[vec_env_cls]
        return original(*args, vec_env_cls=vec_env_cls, **kwargs)

    make_vec_env._powerzoo_compat = True  # type: ignore[attr-defined]
    module.make_vec_env = make_vec_env


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of the SB3 module to patch it after loading."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            _patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Apply the wrapper now (SB3 already imported) or when SB3's env_util is first imported."""
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
