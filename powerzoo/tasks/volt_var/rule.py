"""``volt_var_123``'s rule: the feeder's own regulator and capacitor controls, PV at unity.

**RegControl** (the settings of the IEEE 123 files, ``IEEE123Master.dss`` /
``IEEE123Regulators.DSS``): each controller reads its compensated voltage ``|V2 / PT - I2 (R +
jX) / CT|`` on the 120 V base (line-drop compensation: ``vreg`` 120 V for reg1-reg3 and 124 V for
reg4, bandwidth 2 V, 1 V for reg3, R and X in volts) and, when it lies outside ``vreg +- band /
2``, moves the tap by the number of 0.75 V steps (0.625 %) that brings it back to ``vreg``
(OpenDSS's RegControl does the same in one control iteration, up to its 16-step limit). With
30-minute steps the time delays (15 s in OpenDSS by default, tens of seconds in practice)
expire within the step, so the move is made in the step it is needed. The controllers are
time-graded as in practice: the substation regulator (reg1) acts first and the line regulators
downstream see its move (each of its steps raises their voltage by 0.625 %) before they decide.

**CapControl** (voltage control; the IEEE 123 files define none, these are typical settings):
a capacitor goes in service when the mean voltage of its phases is below 118 V (0.983 p.u.) and
out above 125 V (1.042 p.u.), and otherwise stays as it is.

The rule reads what the controllers would measure as the step begins: the task's observation
holds the flow of the step's loads and PV under the settings in force (:mod:`.task`).
"""

from __future__ import annotations

import numpy as np

from powerzoo.tasks.volt_var.grid import PT_BASE_V
from powerzoo.tasks.volt_var.spec import TAP_STEPS

__all__ = ["CAP_OFF_V", "CAP_ON_V", "STEP_V", "capcontrol", "regcontrol_taps"]

STEP_V = 0.00625 * PT_BASE_V  # one tap step on the 120 V base (V)
CAP_ON_V = 118.0  # capacitor in service below this (V on 120 V)
CAP_OFF_V = 125.0  # capacitor out of service above this (V on 120 V)


def _moves(error_v: np.ndarray, band_v: np.ndarray) -> np.ndarray:
    """Tap steps that bring a compensated voltage ``vreg - error_v`` back to ``vreg`` when
    ``|error_v|`` exceeds half the band (else 0)."""
    return np.where(np.abs(error_v) > band_v / 2.0, np.round(error_v / STEP_V), 0.0)


def regcontrol_taps(
    taps: np.ndarray, regulated_v: np.ndarray, vreg_v: np.ndarray, band_v: np.ndarray
) -> np.ndarray:
    """Tap positions after one RegControl action (module docstring).

    Args:
        taps: [B, n_reg] current tap positions; column 0 is the substation regulator, upstream
            of the others.
        regulated_v: [B, n_reg] each controller's compensated voltage [V on 120 V].
        vreg_v: [n_reg] set points [V on 120 V].
        band_v: [n_reg] bandwidths [V].

    Returns:
        [B, n_reg] new tap positions within +-16.
    """
    error = vreg_v - regulated_v
    move = _moves(error, band_v)
    seen = regulated_v[:, 1:] * (1.0 + 0.00625 * move[:, :1])  # after the head's move
    move[:, 1:] = _moves(vreg_v[1:] - seen, band_v[1:])
    return np.clip(taps + move, -TAP_STEPS, TAP_STEPS)


def capcontrol(cap_on: np.ndarray, capacitor_v_pu: np.ndarray) -> np.ndarray:
    """Capacitor states after one voltage-controlled CapControl action (module docstring).

    Args:
        cap_on: [B, n_cap] 1 in service, 0 out.
        capacitor_v_pu: [B, n_cap] mean voltage of each capacitor's phases [p.u.].

    Returns:
        [B, n_cap] new states (0 or 1).
    """
    v = capacitor_v_pu * PT_BASE_V
    return np.where(v < CAP_ON_V, 1.0, np.where(v > CAP_OFF_V, 0.0, np.round(cap_on)))
