"""The European LV feeder against pandapower's three-phase power flow (``runpp_3ph``).

pandapower models the feeder's parts in sequence components, which are comparable with the
OpenDSS files when built like this:

* lines: the line codes' R1, X1, R0, X0 (no capacitance), lengths from the files;
* the 800 kVA Dyn transformer: vk = |0.4 % + j 4 %|, vkr = 0.4 % (OpenDSS's default 0.2 % per
  winding), the same in the zero sequence, its zero-sequence magnetising impedance made very
  large (``mag0_percent`` 1e6: OpenDSS's delta-wye has no magnetising branch; at pandapower's
  100 the LV voltages differ by 1e-4 p.u., at 1e4 by 2e-6), 30 degrees of phase shift;
* the source: pandapower's external grid is an ideal voltage in the positive sequence while
  OpenDSS's source has its short-circuit impedance (ISC3 = 3 kA at 11 kV) in every sequence.
  That impedance is not comparable, so both sides use a stiff source here (ISC 1e9 A in the
  feeder's files, 1e9 MVA in pandapower), at the files' 1.05 p.u.;
* loads: constant power, wye, on their phases (the flow has no Vminpu switch).

Measured worst differences over every bus and phase (each load x U[1, 6], lowest voltage
0.978 p.u.): 8.4e-8 p.u. in magnitude, 6.4e-6 degree in angle (at the published loading
4e-8 p.u., 3e-6 degree): what pandapower's own tolerance, the finite ``mag0_percent`` and
OpenDSS's 1 ppm anti-floating shunt in the transformer leave. Checked against the OpenDSS
tolerances (1e-5 p.u., 1e-3 degree).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from powerzoo.physics.unbalanced import feeder_from_master, load_feeder, unbalanced_power_flow

pp = pytest.importorskip("pandapower")

V_TOL_PU = 1e-5
ANGLE_TOL_DEG = 1e-3


def _pandapower_net(feeder):
    """The feeder as a pandapower net; returns it, its bus index per bus name and the
    (asymmetric load index, phase letter) of every load."""
    circuit = feeder.circuit
    net = pp.create_empty_network(f_hz=feeder.frequency_hz)
    source_kv = circuit.source.basekv
    bus = {
        name: pp.create_bus(net, vn_kv=source_kv if name == "sourcebus" else 0.416, name=name)
        for name in feeder.bus_names
    }
    pp.create_ext_grid(
        net,
        bus["sourcebus"],
        vm_pu=circuit.source.pu,
        va_degree=0.0,
        s_sc_max_mva=1e9,
        rx_max=0.1,
        x0x_max=1.0,
        r0x0_max=0.1,
    )
    (trafo,) = circuit.transformers.values()
    hv, lv = trafo.windings
    r_pct = (hv["rpu"] + lv["rpu"]) * 100.0
    vk_pct = math.hypot(r_pct, trafo.xhl * 100.0)
    pp.create_transformer_from_parameters(
        net,
        bus[hv["bus"].split(".")[0].lower()],
        bus[lv["bus"].split(".")[0].lower()],
        sn_mva=hv["kva"] / 1000.0,
        vn_hv_kv=hv["kv"],
        vn_lv_kv=lv["kv"],
        vkr_percent=r_pct,
        vk_percent=vk_pct,
        pfe_kw=0.0,
        i0_percent=0.0,
        shift_degree=30.0,
        vector_group="Dyn",
        vk0_percent=vk_pct,
        vkr0_percent=r_pct,
        mag0_percent=1e6,
        mag0_rx=0.0,
        si0_hv_partial=0.9,
    )
    for line in circuit.lines.values():
        code = circuit.linecodes[line.linecode]
        assert code.units == "km"
        pp.create_line_from_parameters(
            net,
            bus[line.bus1.split(".")[0].lower()],
            bus[line.bus2.split(".")[0].lower()],
            length_km=line.length / line.units_factor,
            r_ohm_per_km=code.r1,
            x_ohm_per_km=code.x1,
            c_nf_per_km=0.0,
            max_i_ka=1.0,
            r0_ohm_per_km=code.r0,
            x0_ohm_per_km=code.x0,
            c0_nf_per_km=0.0,
        )
    loads = {}
    for load in circuit.loads.values():
        name, node = load.bus1.split(".")[:2]
        index = pp.create_asymmetric_load(net, bus[name.lower()], type="wye")
        loads[load.name] = (index, "abc"[int(node) - 1])
    return net, bus, loads


def test_european_lv_matches_pandapower_runpp_3ph(tmp_path) -> None:
    base = load_feeder("european_lv")
    master = tmp_path / "stiff_source.dss"
    master.write_text(f'Redirect "{base.master_file}"\nEdit Vsource.Source ISC3=1e9 ISC1=1e9\n')
    feeder = feeder_from_master(master)
    assert feeder.load_names == base.load_names
    net, bus, loads = _pandapower_net(feeder)
    scale = np.random.default_rng(45).uniform(1.0, 6.0, size=feeder.n_loads)
    p, q = feeder.p_kw * scale, feeder.q_kvar * scale
    table = net.asymmetric_load
    for k, name in enumerate(feeder.load_names):
        index, phase = loads[name]
        table.loc[index, f"p_{phase}_mw"] = p[k] / 1000.0
        table.loc[index, f"q_{phase}_mvar"] = q[k] / 1000.0
    pp.runpp_3ph(net, tolerance_mva=1e-9, max_iteration=100, numba=False)
    assert net.converged
    res = net.res_bus_3ph.loc[[bus[name] for name in feeder.bus_names]]
    ref_vm = res[["vm_a_pu", "vm_b_pu", "vm_c_pu"]].to_numpy()
    ref_va = res[["va_a_degree", "va_b_degree", "va_c_degree"]].to_numpy()

    ours = unbalanced_power_flow(feeder, p, q)
    assert ours.converged.all()
    assert np.nanmin(ours.vm_pu) < 0.98  # a loading that moves the voltages (1.05 at the source)
    dv = np.abs(ours.vm_pu[0] - ref_vm)
    dang = np.abs((ours.va_deg[0] - ref_va + 180.0) % 360.0 - 180.0)
    assert np.nanmax(dv) < V_TOL_PU and np.nanmax(dang) < ANGLE_TOL_DEG, (dv.max(), dang.max())
