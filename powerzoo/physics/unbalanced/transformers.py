"""OpenDSS transformers (two windings, any phase count and connection) and regulator controls.

A two-winding transformer is, per phase, a short-circuit admittance ``y`` between two windings
whose voltages are scaled to one volt by ``1 / (V_base * tap)``: on the four winding
terminals ``(w1+, w1-, w2+, w2-)`` its admittance is ``y * u u^T`` with
``u = [1/(V1 t1), -1/(V1 t1), -1/(V2 t2), 1/(V2 t2)]`` (rank one per phase), plus OpenDSS's
anti-floating shunt (``ppm_antifloat`` parts per million of the winding's base admittance,
half on each terminal) and the magnetising branch (``%imag``, ``%noloadloss``) on winding 2.
Wye windings connect each phase to the neutral conductor; delta windings to the next phase in
the delta's direction (delta lags wye unless ``LeadLag`` says otherwise). A step-voltage
regulator is such a transformer named by a ``RegControl``; its tap enters the flow as an input
(:class:`RegulatorUnit` keeps the rank-one part separate for that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from powerzoo.physics.unbalanced.dss_reader import DSSFormatError, parse_list
from powerzoo.physics.unbalanced.elements import DSSElement, bus_conductors

__all__ = ["RegControl", "RegulatorUnit", "Transformer"]


def _connection(value: str, where: str) -> str:
    conn = value.strip().strip("'\"").lower()
    if conn in ("wye", "y", "ln", "star"):
        return "wye"
    if conn in ("delta", "d", "ll"):
        return "delta"
    raise DSSFormatError(f"{where}: unknown connection {value!r}")


@dataclass(frozen=True)
class RegulatorUnit:
    """One phase of a regulating transformer: terminal positions in the transformer's
    conductor list, short-circuit admittance ``y`` [S on a 1 V base] and winding voltage bases
    [V]; ``tap_winding`` (0 or 1) is the winding whose tap is the input."""

    terminals: tuple[int, int, int, int]
    y: complex
    vbase: tuple[float, float]
    tap_winding: int


class Transformer(DSSElement):
    """A two-winding transformer (``phases`` 1 to 3, wye or delta windings, per-unit taps)."""

    dss_class = "transformer"
    aliases = {
        "ppm": "ppm_antifloat",
        "x12": "xhl",
        "x13": "xht",
        "x23": "xlt",
        "pct_rs": "pct_rs",
    }
    ignored = frozenset(
        {
            "bank",
            "sub",
            "subname",
            "normhkva",
            "emerghkva",
            "faultrate",
            "basefreq",
            "thermal",
            "n",
            "m",
            "flrise",
            "hsrise",
            "normamps",
            "emergamps",
            "pctperm",
            "repair",
            "xrconst",
        }
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.phases = 3
        self.active = 0
        self.xhl, self.xht, self.xlt = 0.07, 0.35, 0.30  # per unit
        self.pct_imag = self.pct_noloadloss = 0.0
        self.ppm = 1.0
        self.hv_leads_lv = False
        self._new_windings(2)

    @staticmethod
    def _winding() -> dict:
        return {
            "bus": "",
            "conn": "wye",
            "kv": 12.47,
            "kva": 1000.0,
            "rpu": 0.002,
            "tap": 1.0,
            "rneut": -1.0,
            "xneut": 0.0,
            "mintap": 0.9,
            "maxtap": 1.1,
            "numtaps": 32,
        }

    def _new_windings(self, n: int) -> None:
        self.windings = [self._winding() for _ in range(n)]

    def _each(self, value: str, key: str, convert) -> None:
        for w, item in zip(self.windings, parse_list(value), strict=False):
            w[key] = convert(item)

    # ---- properties ------------------------------------------------------------------------
    def set_phases(self, value: str, where: str) -> None:
        self.phases = int(self._number(value, where))

    def set_windings(self, value: str, where: str) -> None:
        n = int(self._number(value, where))
        if n != 2:
            raise DSSFormatError(f"{where}: transformer {self.name}: only 2 windings supported")
        self._new_windings(n)

    def set_wdg(self, value: str, where: str) -> None:
        k = int(self._number(value, where))
        if not 1 <= k <= len(self.windings):
            raise DSSFormatError(f"{where}: transformer {self.name}: no winding {k}")
        self.active = k - 1

    def set_bus(self, value: str, where: str) -> None:
        self.windings[self.active]["bus"] = value

    def set_conn(self, value: str, where: str) -> None:
        self.windings[self.active]["conn"] = _connection(value, where)

    def set_kv(self, value: str, where: str) -> None:
        self.windings[self.active]["kv"] = self._number(value, where)

    def set_kva(self, value: str, where: str) -> None:
        kva = self._number(value, where)
        self.windings[self.active]["kva"] = kva
        for w in self.windings:  # 2 windings: both ratings follow the one given
            w["kva"] = kva

    def set_pct_r(self, value: str, where: str) -> None:
        self.windings[self.active]["rpu"] = self._number(value, where) / 100.0

    def set_tap(self, value: str, where: str) -> None:
        self.windings[self.active]["tap"] = self._number(value, where)

    def set_rneut(self, value: str, where: str) -> None:
        self.windings[self.active]["rneut"] = self._number(value, where)

    def set_xneut(self, value: str, where: str) -> None:
        self.windings[self.active]["xneut"] = self._number(value, where)

    def set_maxtap(self, value: str, where: str) -> None:
        self.windings[self.active]["maxtap"] = self._number(value, where)

    def set_mintap(self, value: str, where: str) -> None:
        self.windings[self.active]["mintap"] = self._number(value, where)

    def set_numtaps(self, value: str, where: str) -> None:
        self.windings[self.active]["numtaps"] = int(self._number(value, where))

    def set_buses(self, value: str, where: str) -> None:
        self._each(value, "bus", str)

    def set_conns(self, value: str, where: str) -> None:
        self._each(value, "conn", lambda v: _connection(v, where))

    def set_kvs(self, value: str, where: str) -> None:
        self._each(value, "kv", lambda v: self._number(v, where))

    def set_kvas(self, value: str, where: str) -> None:
        self._each(value, "kva", lambda v: self._number(v, where))

    def set_taps(self, value: str, where: str) -> None:
        self._each(value, "tap", lambda v: self._number(v, where))

    def set_pct_rs(self, value: str, where: str) -> None:
        self._each(value, "rpu", lambda v: self._number(v, where) / 100.0)

    def set_pct_loadloss(self, value: str, where: str) -> None:
        rpu = self._number(value, where) / 200.0
        self.windings[0]["rpu"] = self.windings[1]["rpu"] = rpu

    def set_xhl(self, value: str, where: str) -> None:
        self.xhl = self._number(value, where) / 100.0

    def set_xht(self, value: str, where: str) -> None:
        self.xht = self._number(value, where) / 100.0

    def set_xlt(self, value: str, where: str) -> None:
        self.xlt = self._number(value, where) / 100.0

    def set_pct_imag(self, value: str, where: str) -> None:
        self.pct_imag = self._number(value, where)

    def set_pct_noloadloss(self, value: str, where: str) -> None:
        self.pct_noloadloss = self._number(value, where)

    def set_ppm_antifloat(self, value: str, where: str) -> None:
        self.ppm = self._number(value, where)

    def set_leadlag(self, value: str, where: str) -> None:
        self.hv_leads_lv = value.strip().lower() in ("lead", "ansi")

    # ---- model -----------------------------------------------------------------------------
    @property
    def n_conds(self) -> int:
        """Conductors per winding (phases + neutral)."""
        return self.phases + 1

    def vbase(self, k: int) -> float:
        """Turns voltage base of winding ``k`` [V] (phase-neutral for 2-3 phase wye)."""
        w = self.windings[k]
        if w["conn"] == "wye" and self.phases in (2, 3):
            return w["kv"] * 1000.0 / math.sqrt(3.0)
        return w["kv"] * 1000.0

    def conductors(self) -> list[tuple[str, int]]:
        """``(bus, node)`` of each conductor, winding 1 first."""
        out = []
        for w in self.windings:
            bus, nodes = bus_conductors(w["bus"], self.phases, self.n_conds)
            out.extend((bus, n) for n in nodes)
        return out

    def _delta_direction(self) -> int:
        c1, c2 = self.windings[0]["conn"], self.windings[1]["conn"]
        if c1 == c2:
            return 1
        hv = 0 if self.windings[0]["kv"] >= self.windings[1]["kv"] else 1
        lead = 1 if self.hv_leads_lv else -1
        return -lead if self.windings[hv]["conn"] == "wye" else lead

    def _terminal_pairs(self, phase: int) -> list[tuple[int, int]]:
        """Positions (in :meth:`conductors`) of the two ends of each winding of ``phase``
        (1-based)."""
        nc = self.n_conds
        if self.phases == 1:
            return [(k * nc, k * nc + 1) for k in range(2)]
        pairs = []
        for k, w in enumerate(self.windings):
            if w["conn"] == "wye":
                pairs.append((k * nc + phase - 1, k * nc + nc - 1))
            else:
                other = phase + self._delta_direction()
                if self.phases > 2:
                    other = 1 if other > self.phases else self.phases if other < 1 else other
                elif other < 1:
                    other = 3
                pairs.append((k * nc + phase - 1, k * nc + other - 1))
        return pairs

    def _base_admittances(self) -> tuple[complex, float, list[float]]:
        va_phase = self.windings[0]["kva"] * 1000.0 / self.phases
        zbase = 1.0 / va_phase
        r = self.windings[0]["rpu"] + self.windings[1]["rpu"]
        y = 1.0 / (complex(r, self.xhl) * zbase)
        ppm = [-self.ppm * 1e-6 / (self.vbase(k) ** 2 / va_phase) / 2.0 for k in range(2)]
        return y, zbase, ppm

    def units(self, tap_winding: int) -> list[RegulatorUnit]:
        """The rank-one part of each phase, for a regulator whose tap is on ``tap_winding``."""
        y, _, _ = self._base_admittances()
        vb = (self.vbase(0), self.vbase(1))
        out = []
        for phase in range(1, self.phases + 1):
            (a, b), (c, d) = self._terminal_pairs(phase)
            out.append(RegulatorUnit((a, b, c, d), y, vb, tap_winding))
        return out

    def yprim(self, series: bool = True) -> np.ndarray:
        """Primitive admittance [S] over :meth:`conductors`; ``series=False`` leaves out the
        rank-one short-circuit part (what stays fixed when the tap moves)."""
        y, zbase, ppm = self._base_admittances()
        scale = [1.0 / (self.vbase(k) * (self.windings[k]["tap"] or 1e-4)) for k in range(2)]
        u = np.array([scale[0], -scale[0], -scale[1], scale[1]])
        u2 = np.array([0.0, 0.0, scale[1], -scale[1]])
        y_nl = complex(self.pct_noloadloss / 100.0, -self.pct_imag / 100.0) / zbase
        term = y_nl * np.outer(u2, u2) + np.diag(1j * np.array([ppm[0], ppm[0], ppm[1], ppm[1]]))
        if series:
            term = term + y * np.outer(u, u)
        n = 2 * self.n_conds
        out = np.zeros((n, n), dtype=np.complex128)
        for phase in range(1, self.phases + 1):
            idx = [i for pair in self._terminal_pairs(phase) for i in pair]
            out[np.ix_(idx, idx)] += term
        for k, w in enumerate(self.windings):
            if w["conn"] != "wye":
                continue
            neutral = k * self.n_conds + self.n_conds - 1
            if w["rneut"] >= 0:
                zn = complex(w["rneut"], w["xneut"])
                out[neutral, neutral] += 1e6 if zn == 0 else 1.0 / zn
            elif self.ppm != 0:
                out[neutral, neutral] += 1j * ppm[k]
        return out


class RegControl(DSSElement):
    """A regulator control: which transformer (and winding) it taps, and its settings (kept
    for control baselines; the power flow takes the taps as inputs)."""

    dss_class = "regcontrol"
    ignored = frozenset(
        {
            "delay",
            "tapdelay",
            "maxtapchange",
            "revneutral",
            "debugtrace",
            "inversetime",
            "reversible",
            "enabled",
            "revvreg",
            "revband",
            "revr",
            "revx",
            "revdelay",
            "revthreshold",
            "vlimit",
            "ldc_z",
            "rev_z",
            "cogen",
            "ptphase",
            "bus",
            "tapnum",
            "eventlog",
        }
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.transformer = ""
        self.winding = 1
        self.vreg, self.band, self.ptratio, self.ctprim = 120.0, 3.0, 60.0, 300.0
        self.r = self.x = 0.0

    def set_transformer(self, value: str, where: str) -> None:
        self.transformer = value.strip().lower()

    def set_winding(self, value: str, where: str) -> None:
        self.winding = int(self._number(value, where))

    def set_tapwinding(self, value: str, where: str) -> None:
        self.winding = int(self._number(value, where))

    def set_vreg(self, value: str, where: str) -> None:
        self.vreg = self._number(value, where)

    def set_band(self, value: str, where: str) -> None:
        self.band = self._number(value, where)

    def set_ptratio(self, value: str, where: str) -> None:
        self.ptratio = self._number(value, where)

    def set_ctprim(self, value: str, where: str) -> None:
        self.ctprim = self._number(value, where)

    def set_r(self, value: str, where: str) -> None:
        self.r = self._number(value, where)

    def set_x(self, value: str, where: str) -> None:
        self.x = self._number(value, where)
