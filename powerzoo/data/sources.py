"""Raw inputs for the profile generator, read offline from files that pip packages ship.

Provenance
----------
* Weather: the typical-meteorological-year file ``723170TYA.CSV`` bundled with **pvlib**
  (NREL TMY3, station 723170, Greensboro Piedmont Triad International, NC, USA; 36.1 N,
  79.95 W, UTC-5). Hourly global horizontal, direct normal and diffuse horizontal irradiance
  (W/m^2), dry-bulb temperature (deg C) and 10 m wind speed (m/s), 8,760 rows, one typical
  year.
* Wind turbine: the power curves and data sheet of windpowerlib's turbine library
  (``oedb/power_curves.csv``, ``oedb/turbine_data.csv``; **windpowerlib**, MIT licence), read
  with the csv module by :mod:`powerzoo.data.weather`.

The demand shape is PowerZoo's own model (:mod:`powerzoo.data.profiles`), driven by this
weather. The files are read with the standard library only (no pandas, no pvlib or windpowerlib
import), once per process. Nothing is downloaded and nothing from pvlib or windpowerlib is copied
into this repository.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["read_tmy3_weather", "package_data_file"]

TMY3_FILE = "723170TYA.CSV"


def package_data_file(package: str, *relative: str) -> Path:
    """Path of a data file shipped inside an installed package (no import of the package)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package '{package}' is needed for PowerZoo's offline profiles; "
            f"install it with `pip install {package}`"
        )
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*relative)
    if not path.is_file():
        raise FileNotFoundError(f"expected data file {path} in package '{package}'")
    return path


@functools.lru_cache(maxsize=1)
def read_tmy3_weather() -> dict[str, np.ndarray]:
    """Hourly TMY3 weather of Greensboro, NC (8,760 rows, hour-ending local standard time).

    Returns ``ghi_w_per_m2``, ``dni_w_per_m2``, ``dhi_w_per_m2``, ``temp_c`` and
    ``wind_speed_m_per_s`` as float64 arrays [8760].
    """
    path = package_data_file("pvlib", "data", TMY3_FILE)
    with path.open(newline="", encoding="latin-1") as fh:
        reader = csv.reader(fh)
        next(reader)  # station metadata line
        header = next(reader)
        columns = {name: i for i, name in enumerate(header)}
        wanted = {
            "ghi_w_per_m2": columns["GHI (W/m^2)"],
            "dni_w_per_m2": columns["DNI (W/m^2)"],
            "dhi_w_per_m2": columns["DHI (W/m^2)"],
            "temp_c": columns["Dry-bulb (C)"],
            "wind_speed_m_per_s": columns["Wspd (m/s)"],
        }
        rows = [[row[i] for i in wanted.values()] for row in reader]
    data = np.asarray(rows, dtype=np.float64)
    if data.shape[0] != 8760:
        raise ValueError(f"{path}: expected 8760 hourly rows, found {data.shape[0]}")
    return {name: data[:, k].copy() for k, name in enumerate(wanted)}
