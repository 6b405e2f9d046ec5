"""SB3's ``make_vec_env`` takes ``vec_env_cls="subproc"`` / ``"dummy"``, as PowerZoo's docs show.

Stable-Baselines3 expects a class there. ``import powerzoo.rl`` teaches SB3's own
``stable_baselines3.common.env_util.make_vec_env`` the two names (``SubprocVecEnv`` and
``DummyVecEnv``); classes and ``None`` pass through untouched, any other string raises a
``ValueError`` listing the valid ones. The function object itself is changed in place, so a
``make_vec_env`` imported before ``powerzoo.rl`` learns the names too: the import order of a
user's script does not matter.

The same front gives a PowerZoo Gymnasium id its module, ``"powerzoo/BatteryArbitrage-v0"`` ->
``"powerzoo:powerzoo/BatteryArbitrage-v0"`` (:func:`importable_id`), so the worker processes of
``SubprocVecEnv``, which never imported PowerZoo, find it: Gymnasium imports the module named
before the ``:`` first.

When SB3 is not imported yet, a one-shot finder waits for its ``env_util`` module and removes
itself once that module has loaded, so ``import powerzoo.rl`` never pays for torch (importing SB3
costs about a second).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["install", "importable_id", "VEC_ENV_NAMES"]

_TARGET = "stable_baselines3.common.env_util"
_MARK = "_powerzoo_vec_env_names"
VEC_ENV_NAMES = ("subproc", "dummy")
"""The strings ``make_vec_env(..., vec_env_cls=...)`` accepts besides a class or ``None``."""


def _vec_env_class(name: str) -> type:
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    classes = {"subproc": SubprocVecEnv, "dummy": DummyVecEnv}
    if name not in classes:
        raise ValueError(
            f"unknown vec_env_cls {name!r}; valid: {', '.join(VEC_ENV_NAMES)}, or a VecEnv class"
        )
    return classes[name]


def importable_id(env_id: Any) -> Any:
    """``"powerzoo:powerzoo/BatteryArbitrage-v0"`` for a PowerZoo Gymnasium id given without
    its module (anything else unchanged).

    A worker process of ``SubprocVecEnv`` (started with ``forkserver`` or ``spawn``) has not
    imported PowerZoo, so Gymnasium does not know the bare id there; with the ``module:`` prefix
    Gymnasium imports ``powerzoo`` (which registers the ids) before it looks the id up.
    """
    if not isinstance(env_id, str) or ":" in env_id:
        return env_id
    from gymnasium.envs.registration import registry

    from powerzoo.envs.registration import ENTRY_POINT

    spec = registry.get(env_id)
    if spec is None or spec.entry_point != ENTRY_POINT:
        return env_id
    return f"powerzoo:{env_id}"


def _names_to_classes(original: types.FunctionType) -> Any:
    """``original`` (SB3's function, copied) behind a front that maps the names to classes and
    gives PowerZoo's Gymnasium ids their module (:func:`importable_id`)."""

    def make_vec_env(*args: Any, vec_env_cls: Any = None, **kwargs: Any) -> Any:
        if isinstance(vec_env_cls, str):
            vec_env_cls = _vec_env_class(vec_env_cls)
        if args:
            args = (importable_id(args[0]), *args[1:])
        elif "env_id" in kwargs:
            kwargs["env_id"] = importable_id(kwargs["env_id"])
        return original(*args, vec_env_cls=vec_env_cls, **kwargs)

    return make_vec_env


def _forward(*args: Any, **kwargs: Any) -> Any:
    """The body SB3's ``make_vec_env`` gets: it calls the front stored in its module's globals."""
    return _powerzoo_vec_env_names(*args, **kwargs)  # type: ignore[name-defined]  # noqa: F821


def _patch(module: types.ModuleType) -> None:
    """Teach ``module.make_vec_env`` the names, in place (idempotent)."""
    function = module.make_vec_env
    if not isinstance(function, types.FunctionType) or _MARK in module.__dict__:
        return
    original = types.FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    original.__kwdefaults__ = function.__kwdefaults__
    original.__doc__ = function.__doc__
    module.__dict__[_MARK] = _names_to_classes(original)
    # the same function object now forwards to the front: names bound before this still work
    function.__code__ = _forward.__code__.replace(co_name=function.__code__.co_name)
    function.__defaults__ = None
    function.__kwdefaults__ = None
    function.__wrapped__ = original  # inspect.signature shows SB3's own signature


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of SB3's ``env_util`` to patch it once loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: types.ModuleType) -> None:
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Patch SB3's ``make_vec_env`` now (SB3 already imported) or when it is first imported."""
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
