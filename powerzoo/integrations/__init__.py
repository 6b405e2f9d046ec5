"""Bridges to outside engines (Ray RLlib, Ray Tune), above :mod:`powerzoo.rl` in the layer stack.

Nothing here is imported by ``import powerzoo``, and importing this package does not import Ray:
the submodules (e.g. :mod:`powerzoo.integrations.rllib`) need the optional extra
``pip install "powerzoo[ray]"`` and import Ray when they are imported themselves. The public
names are those of each submodule's ``__all__``.
"""

__all__ = ["rllib", "tune"]
