"""Branch ratings by voltage class, for cases published without usable ratings.

pandapower's case118 rates every branch at 9,900 MW, so no dispatch could ever congest it.
:func:`voltage_class_ratings` gives each branch the rating of a typical single-circuit line or
transformer of its voltage class, from published conductor data; the rule does not look at any
dispatch or flow. Cases with published ratings (case5: 400 MW on 1-2, 240 MW on 4-5, the other
branches unlimited) keep them (:func:`with_voltage_class_ratings`).

Lines (both ends at one base voltage)
-------------------------------------
``rating = min(thermal, K(L) x SIL)`` [MVA, used as MW under DC power flow]:

* Thermal rating ``sqrt(3) x V x I``, with the ampacity ``I`` of the usual conductor of the class
  at 75 C conductor, 25 C ambient, 0.61 m/s crosswind and sun (IEEE Std 738 method, as in the
  ACSR ampacity tables of the Aluminum Association and the conductor makers):

  ======  =========================================  =========  =========
  class   conductor per phase                        ampacity   thermal
  ======  =========================================  =========  =========
  138 kV  one 795 kcmil 26/7 ACSR "Drake"              907 A    216.8 MVA
  161 kV  one 795 kcmil 26/7 ACSR "Drake"              907 A    252.9 MVA
  345 kV  two 954 kcmil 54/7 ACSR "Cardinal"         2,020 A    1,207 MVA
  ======  =========================================  =========  =========

  Other classes take the construction of their band: 35-100 kV (66, 69, 86 kV) one 477 kcmil
  26/7 ACSR "Hawk" (659 A; 380 ohm, 0.50 ohm/km as the other single-conductor lines), 100-200 kV
  (115, 132, 150 kV) the Drake line, 200 kV and above (220, 230, 275, 330, 400, 500 kV) the
  two-conductor Cardinal bundle (conservative at 400-500 kV, where three- and four-conductor
  bundles are common). Branches whose both ends are below 35 kV (generator terminals, tertiaries
  and auxiliary buses of the transmission cases) get no rating (unlimited).

* Surge-impedance loading ``SIL = V^2 / Zc`` with the textbook surge impedances of those
  constructions (about 380 ohm for one conductor per phase, 300 ohm for a two-conductor bundle):
  50 MW at 138 kV, 68 MW at 161 kV, 397 MW at 345 kV.
* Long lines are derated by the St. Clair curve (St. Clair 1953; extended analytically by Dunlop,
  Gutman and Marchenko, IEEE Trans. PAS 1979): loadability 3.0 SIL at 50 miles, 2.0 at 100, 1.3 at
  200, 1.0 at 300, 0.8 at 400, 0.6 at 600. ``K(L) = 36.4 x L^-0.63`` (``L`` in miles) passes
  within 8 % of every one of those points; below about 30 miles it exceeds the thermal
  multiple, so short lines are thermal-limited as on the curve.
* The test cases give no line lengths, so ``L`` is estimated from the series reactance with the
  typical reactance of the construction: ``L = x_pu x V^2 / S_base / x_per_km`` with 0.50 ohm/km
  (one conductor per phase) and 0.37 ohm/km (two-conductor bundle).

Transformers (``branch_is_trafo``, or ends at different base voltages)
---------------------------------------------------------------------
* 345 kV high side (345/138 and 345/161 kV): 300 MVA, the top (forced-cooled) nameplate of the
  common 180/240/300 MVA autotransformer (transmission autotransformers are built in the
  300-450 MVA range).
* Below 345 kV (161/138 kV): the thermal rating of a line of the lower voltage class, so the
  transformer never limits below the lines it feeds; a generator step-up or tertiary whose lower
  side is below 35 kV takes the line of its higher class.

On case118 this rates 101 of the 165 138 kV lines at their thermal 216.8 MVA and the 64 longer
ones at 102-217 MVA, the eight 345 kV lines at 518-1,207 MVA, the eleven 345 kV transformers at
300 MVA and the two 161/138 kV ones at 216.8 MVA (the rule it replaces put 152 of the 186
branches at a 100 MW floor and the 345 kV lines at 101-385 MW).
Measured on the test split (the DC-OPF with these limits, units at their Pmin and ramp limits):
at ``1.1 x`` the case's base load times the daily shape one branch binds (the 345/138 kV
transformer 8-5) in 6.2 % of the half-hours; at ``1.4 x``, the load of the case118 dispatch tasks
(``opf_118``), a branch binds in 42.4 % of them, and the DC-OPF stays feasible with hard limits.

Operable check
--------------
:func:`with_voltage_class_ratings` checks the ratings it assigns as
:func:`~powerzoo.physics.cases.load_case` checks published ones
(:mod:`powerzoo.physics.operable_ratings`): a branch that no dispatch keeps within its class
rating between 0.45 and 1.1 x the case's bus loads (one whose load must flow through it, say) is
re-rated to 1.15 x its DC-OPF flow. case14 and case118 pass unchanged; case300 has 42 branches
re-rated.
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import numpy as np

from powerzoo.physics.network import NetworkCase
from powerzoo.physics.operable_ratings import with_operable_ratings

__all__ = [
    "CLASS_BANDS",
    "CONDUCTORS",
    "LineConstruction",
    "TRANSFORMER_345KV_MVA",
    "UNRATED_BELOW_KV",
    "has_published_ratings",
    "st_clair_sil_multiple",
    "voltage_class_ratings",
    "with_voltage_class_ratings",
]

PLACEHOLDER_RATING_MW = 9000.0  # a case whose every rating is at least this has none published
TRANSFORMER_345KV_MVA = 300.0  # rating of a transformer with a 345 kV high side [MVA]
KM_PER_MILE = 1.609344


@dataclasses.dataclass(frozen=True)
class LineConstruction:
    """The typical single-circuit line of one voltage class (module docstring)."""

    conductor: str
    ampacity_a: float  # per phase (all sub-conductors) [A]
    surge_impedance_ohm: float
    reactance_ohm_per_km: float

    def thermal_mva(self, kv: float) -> float:
        """Thermal rating ``sqrt(3) V I`` [MVA] at line-to-line voltage ``kv`` [kV]."""
        return math.sqrt(3.0) * kv * self.ampacity_a / 1000.0

    def sil_mw(self, kv: float) -> float:
        """Surge-impedance loading ``V^2 / Zc`` [MW] at ``kv`` [kV]."""
        return kv * kv / self.surge_impedance_ohm


_DRAKE = LineConstruction("1 x 795 kcmil ACSR Drake", 907.0, 380.0, 0.50)
_CARDINAL_BUNDLE = LineConstruction("2 x 954 kcmil ACSR Cardinal", 2020.0, 300.0, 0.37)
CONDUCTORS: dict[float, LineConstruction] = {
    138.0: _DRAKE,
    161.0: _DRAKE,
    345.0: _CARDINAL_BUNDLE,
}
# the other classes: the construction of their band, from its lowest voltage [kV] up
CLASS_BANDS: tuple[tuple[float, LineConstruction], ...] = (
    (200.0, _CARDINAL_BUNDLE),
    (100.0, _DRAKE),
    (35.0, LineConstruction("1 x 477 kcmil ACSR Hawk", 659.0, 380.0, 0.50)),
)
UNRATED_BELOW_KV = 35.0  # branches whose both ends are below this get no rating


def st_clair_sil_multiple(length_km: np.ndarray) -> np.ndarray:
    """Loadability of a line [multiples of SIL] by length [km]: ``36.4 x L_miles^-0.63``, the
    fit of the St. Clair curve (module docstring); infinite at zero length."""
    miles = np.maximum(np.asarray(length_km, dtype=float), 1e-9) / KM_PER_MILE
    return 36.4 * miles**-0.63


def has_published_ratings(case: NetworkCase) -> bool:
    """True if any branch rating is below :data:`PLACEHOLDER_RATING_MW` (a real rating)."""
    return bool(np.any(case.branch_rate_a_mw < PLACEHOLDER_RATING_MW))


def _construction(kv: float) -> LineConstruction | None:
    """The typical line of the ``kv`` class (:data:`CONDUCTORS`, else :data:`CLASS_BANDS`);
    ``None`` below :data:`UNRATED_BELOW_KV`."""
    if float(kv) in CONDUCTORS:
        return CONDUCTORS[float(kv)]
    for lowest, construction in CLASS_BANDS:
        if kv >= lowest:
            return construction
    return None


def voltage_class_ratings(case: NetworkCase) -> np.ndarray:
    """Branch ratings [n_branch] [MW, rounded to 0.1 MW] by voltage class (module docstring);
    ``inf`` for branches whose both ends are below :data:`UNRATED_BELOW_KV`."""
    kv_from = case.bus_vn_kv[case.branch_from_bus]
    kv_to = case.bus_vn_kv[case.branch_to_bus]
    transformer = case.branch_is_trafo | (kv_from != kv_to)
    rating = np.empty(case.n_branch)
    for k in range(case.n_branch):
        high, low = max(kv_from[k], kv_to[k]), min(kv_from[k], kv_to[k])
        if transformer[k]:
            if high >= 345.0:
                rating[k] = TRANSFORMER_345KV_MVA
                continue
            feeds = _construction(low) or _construction(high)  # the lower class it feeds
            kv = low if _construction(low) is not None else high
            rating[k] = np.inf if feeds is None else feeds.thermal_mva(kv)
            continue
        line = _construction(high)
        if line is None:
            rating[k] = np.inf
            continue
        z_base_ohm = high * high / case.base_mva
        length_km = case.branch_x_pu[k] * z_base_ohm / line.reactance_ohm_per_km
        stability = float(st_clair_sil_multiple(length_km)) * line.sil_mw(high)
        rating[k] = min(line.thermal_mva(high), stability)
    return np.round(rating, 1)


_RATED: weakref.WeakKeyDictionary[NetworkCase, NetworkCase] = weakref.WeakKeyDictionary()


def with_voltage_class_ratings(case: NetworkCase) -> NetworkCase:
    """``case`` itself if it has published ratings, else a copy rated by
    :func:`voltage_class_ratings` and made operable
    (:func:`~powerzoo.physics.operable_ratings.with_operable_ratings`; the same copy for the
    same ``case`` object)."""
    if has_published_ratings(case):
        return case
    rated = _RATED.get(case)
    if rated is None:
        by_class = dataclasses.replace(case, branch_rate_a_mw=voltage_class_ratings(case))
        rated = _RATED[case] = with_operable_ratings(by_class, "voltage class")
    return rated
