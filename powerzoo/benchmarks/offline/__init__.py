"""Offline RL datasets: collect transitions into HDF5 and read them back.

:class:`DatasetGenerator` rolls a policy out in a PowerZoo env and streams the transitions to an
HDF5 file; :class:`DatasetLoader` opens such a file, checks it and serves whole arrays, episodes
and shuffled minibatches. ``h5py`` is needed (``pip install h5py`` or ``powerzoo[data]``).

Modules, one job each:

- :mod:`~powerzoo.benchmarks.offline.schema`: the HDF5 layout (dataset names, dtypes, attributes);
- :mod:`~powerzoo.benchmarks.offline.buffer`: steps of parallel episode streams in, whole episodes
  out;
- :mod:`~powerzoo.benchmarks.offline.writer`: appending episode blocks and the atomic file write;
- :mod:`~powerzoo.benchmarks.offline.collect`: :class:`DatasetGenerator`, rollouts and seeding rule;
- :mod:`~powerzoo.benchmarks.offline.load`: :class:`DatasetLoader`, schema checks and reading;
- :mod:`~powerzoo.benchmarks.offline.minari_export`: export to Minari.

Transitions are buffered in numpy and appended every ``buffer_steps`` steps, so memory does not
grow with the number of episodes. The file is written under a temporary name in the target folder
and renamed into place only when complete; an exception or ``KeyboardInterrupt`` removes the
temporary file, so ``save_path`` never holds a partial dataset. (A process killed with SIGKILL
cannot clean up: its ``.<stem>-XXXX.tmp`` file stays behind, but ``save_path`` is untouched.)
"""

from __future__ import annotations

from powerzoo.benchmarks.offline.buffer import EpisodeBuffer
from powerzoo.benchmarks.offline.collect import DatasetGenerator
from powerzoo.benchmarks.offline.load import DatasetLoader
from powerzoo.benchmarks.offline.schema import (
    DEFAULT_INFO_KEYS,
    EPISODE_KEYS,
    FORMAT_NAME,
    SCHEMA_VERSION,
    TRANSITION_KEYS,
)

_EpisodeBuffer = EpisodeBuffer  # the name the tests knew before the split

__all__ = [
    "DatasetGenerator",
    "DatasetLoader",
    "EpisodeBuffer",
    "SCHEMA_VERSION",
    "FORMAT_NAME",
    "TRANSITION_KEYS",
    "EPISODE_KEYS",
    "DEFAULT_INFO_KEYS",
]
