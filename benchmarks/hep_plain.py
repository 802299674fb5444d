"""The HEP selection as a physicist writes it without pairflow: one columnar script over all events.

This is the user's alternative to ``pairflow app=hep`` that benchmarks/pipeline.py measures
against. It imports only uproot, awkward and numpy and is written from the selection's
statement (apps/hep.py's docstring and configs/app/hep.yaml), not from pairflow's operators: read
every branch it needs once, replicate the events in memory ``--repeat`` times (event numbers
run on across copies, as pairflow's RootSource numbers a file read several times), then apply
the cuts in the written order, each cut slicing every array down to the events still selected.

    .venv/bin/python benchmarks/hep_plain.py                      # the bundled 2,421 events
    .venv/bin/python benchmarks/hep_plain.py --repeat 414 --out sel.parquet   # 1,002,294 events

The heavy top reconstruction draws ``--draws`` smeared solutions per event; its random numbers
are a pure function of (event number, draw, stream) (SplitMix64 + Box-Muller), so the selection
equals pairflow's whatever the batching. It runs in chunks of events only to bound memory.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import awkward as ak
import numpy as np
import uproot

BRANCHES = ["Jet_Px", "Jet_Py", "Jet_Pz", "Jet_E", "Jet_btag", "Jet_ID",
            "Muon_Px", "Muon_Py", "Muon_Pz", "Muon_E", "Muon_Charge", "Muon_Iso",
            "Electron_Px", "Electron_Py", "Electron_Pz", "Electron_E", "Electron_Charge",
            "Electron_Iso", "MET_px", "MET_py", "NPrimaryVertices", "triggerIsoMu24",
            "EventWeight"]
OUTPUT = ["event", "EventWeight", "n_jets", "n_b", "n_lep", "lep_pt", "lep_iso", "MET_px",
          "MET_py"]
Z_MASS, W_MASS, TOP_MASS = 91.19, 80.4, 172.5


def default_file() -> str:
    import skhep_testdata
    return skhep_testdata.data_path("uproot-HZZ.root")


def pt_eta(px, py, pz):
    pt = np.hypot(px, py)
    return pt, np.arcsinh(pz / np.maximum(pt, 1e-9))


def mass(e, px, py, pz):
    return np.sqrt(np.maximum(e * e - px * px - py * py - pz * pz, 0.0))


def splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def normals(events, draws, streams, seed=0):
    """Standard normals (n, draws, streams) indexed by (event, draw, stream)."""
    ev = np.asarray(events, dtype=np.uint64)[:, None, None]
    d = np.arange(draws, dtype=np.uint64)[None, :, None]
    s = np.arange(streams, dtype=np.uint64)[None, None, :]
    key = (ev * np.uint64(draws * streams) + d * np.uint64(streams) + s) * np.uint64(2)
    key = key ^ splitmix64(np.full(1, seed, dtype=np.uint64))
    u1 = ((splitmix64(key) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    u2 = (splitmix64(key + np.uint64(1)) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def has_z(px, py, pz, e, q):
    """An opposite-charge pair within 15 GeV of the Z mass, per event."""
    a, c = ak.unzip(ak.combinations(ak.zip({"px": px, "py": py, "pz": pz, "e": e, "q": q}), 2))
    m = mass(a.e + c.e, a.px + c.px, a.py + c.py, a.pz + c.pz)
    return ak.to_numpy(ak.any((a.q * c.q < 0) & (abs(m - Z_MASS) < 15.0), axis=1))


def top_reco(ev, lep, bpx, bpy, bpz, be, metx, mety, draws):
    """Fraction of draws whose m(l nu b) lies within 40 GeV of the top mass, per event: jet
    energy scale 1 + 0.1 z on the two leading b-jets, MET smeared by 10 GeV per component,
    neutrino pz from the W-mass constraint (smaller |pz|; the real part when complex), the b-jet
    giving m(l nu b) closest to the top mass."""
    n = len(ev)
    lpx, lpy, lpz, le = (lep[k][:, None] for k in ("px", "py", "pz", "e"))
    bj = [ak.to_numpy(ak.fill_none(ak.pad_none(x, 2, axis=1, clip=True), np.nan)
                      ).astype(np.float64) for x in (bpx, bpy, bpz, be)]
    z = normals(ev, draws, 4)
    nux = metx[:, None] + 10.0 * z[:, :, 2]
    nuy = mety[:, None] + 10.0 * z[:, :, 3]
    lpt2 = lpx * lpx + lpy * lpy
    mu = 0.5 * W_MASS * W_MASS + lpx * nux + lpy * nuy
    a = mu * lpz / lpt2
    root = np.sqrt(np.maximum(a * a - (le * le * (nux * nux + nuy * nuy) - mu * mu) / lpt2, 0.0))
    nuz = np.where(np.abs(a - root) < np.abs(a + root), a - root, a + root)
    nue = np.sqrt(nux * nux + nuy * nuy + nuz * nuz)
    wx, wy, wz, we = lpx + nux, lpy + nuy, lpz + nuz, le + nue
    best, best_d = np.full((n, draws), np.nan), np.full((n, draws), np.inf)
    for j in range(2):
        s = 1.0 + 0.10 * z[:, :, j]
        m = mass(we + s * bj[3][:, j:j + 1], wx + s * bj[0][:, j:j + 1],
                 wy + s * bj[1][:, j:j + 1], wz + s * bj[2][:, j:j + 1])
        d = np.abs(m - TOP_MASS)
        d = np.where(np.isnan(d), np.inf, d)
        best, best_d = np.where(d < best_d, m, best), np.where(d < best_d, d, best_d)
    return (np.abs(best - TOP_MASS) < 40.0).mean(axis=1)


def select(ev: ak.Array, draws: int = 1024, chunk: int = 4096) -> dict:
    """The selection in the written order over all events; returns the selected rows (OUTPUT
    columns plus the selected good jets' pT, for the histograms) and the cutflow."""
    flow = {"all": len(ev)}

    def cut(mask, name):
        nonlocal ev
        ev = ev[np.asarray(mask, bool)]
        flow[name] = len(ev)

    cut(ev.triggerIsoMu24, "trigger")
    cut(ev.NPrimaryVertices >= 1, "pv")
    pt, eta = pt_eta(ev.Jet_Px, ev.Jet_Py, ev.Jet_Pz)
    good = (pt > 25.0) & (abs(eta) < 2.5) & ev.Jet_ID
    ev = ak.with_field(ev, pt, "jet_pt_all")
    ev = ak.with_field(ev, good, "jet_good")
    cut(ak.sum(good, axis=1) >= 2, "n_jets")
    good = ev.jet_good
    jets = {k: ev[f"Jet_{k}"][good] for k in ("Px", "Py", "Pz", "E", "btag")}
    tag = jets["btag"] > 1.0
    cut(ak.sum(tag, axis=1) >= 1, "n_bjets")
    lep = {}
    for br, out, ptc, etac in (("Muon", "mu", 20.0, 2.4), ("Electron", "el", 20.0, 2.47)):
        lpt, leta = pt_eta(ev[f"{br}_Px"], ev[f"{br}_Py"], ev[f"{br}_Pz"])
        ok = (lpt > ptc) & (abs(leta) < etac)
        ev = ak.with_field(ev, lpt, f"{out}_pt_all")
        ev = ak.with_field(ev, ok, f"{out}_good")
    n_lep = ak.to_numpy(ak.sum(ev.mu_good, axis=1) + ak.sum(ev.el_good, axis=1))
    cut(n_lep >= 1, "one_lepton")
    # the leading selected lepton (muons before electrons among equal pT)
    mu, el = ev.mu_good, ev.el_good
    for k, mb, eb in (("px", "Muon_Px", "Electron_Px"), ("py", "Muon_Py", "Electron_Py"),
                      ("pz", "Muon_Pz", "Electron_Pz"), ("e", "Muon_E", "Electron_E"),
                      ("pt", "mu_pt_all", "el_pt_all"), ("iso", "Muon_Iso", "Electron_Iso")):
        lep[k] = ak.concatenate([ev[mb][mu], ev[eb][el]], axis=1)
    lead = ak.argmax(lep["pt"], axis=1, keepdims=True)
    ev = ak.with_field(ev, ak.zip({k: ak.fill_none(ak.firsts(v[lead]), np.nan)
                                   for k, v in lep.items()}), "lep")
    cut(ak.to_numpy(ev.lep.pt) > 25.0, "lepton_pt")
    cut(np.hypot(ak.to_numpy(ev.MET_px), ak.to_numpy(ev.MET_py)) > 20.0, "met")
    cut(ak.to_numpy(ev.lep.iso) < 3.0, "lepton_iso")
    z = has_z(*(ev[f"Muon_{k}"][ev.mu_good] for k in ("Px", "Py", "Pz", "E", "Charge"))) | \
        has_z(*(ev[f"Electron_{k}"][ev.el_good] for k in ("Px", "Py", "Pz", "E", "Charge")))
    cut(~z, "z_veto")
    metx = ak.to_numpy(ev.MET_px).astype(np.float64)
    mety = ak.to_numpy(ev.MET_py).astype(np.float64)
    lp = {k: ak.to_numpy(ev.lep[k]).astype(np.float64) for k in ("px", "py", "pz", "e", "pt")}
    mt2 = 2.0 * (lp["pt"] * np.hypot(metx, mety) - lp["px"] * metx - lp["py"] * mety)
    cut(np.sqrt(np.maximum(mt2, 0.0)) > 30.0, "mt_w")
    g = ev.jet_good
    a, c = ak.unzip(ak.combinations(ak.zip({k: ev[f"Jet_{k}"][g] for k in ("Px", "Py", "Pz", "E")}
                                           ), 2))
    mjj = mass(a.E + c.E, a.Px + c.Px, a.Py + c.Py, a.Pz + c.Pz)
    cut(ak.to_numpy(ak.any((mjj > 50.0) & (mjj < 120.0), axis=1)), "w_window")
    g = ev.jet_good
    b = {k: ev[f"Jet_{k}"][g] for k in ("Px", "Py", "Pz", "E", "btag")}
    tag = b["btag"] > 1.0
    frac = np.empty(len(ev))
    lp = {k: ak.to_numpy(ev.lep[k]).astype(np.float64) for k in ("px", "py", "pz", "e")}
    metx = ak.to_numpy(ev.MET_px).astype(np.float64)
    mety = ak.to_numpy(ev.MET_py).astype(np.float64)
    evn = ak.to_numpy(ev.event)
    for s in range(0, len(ev), chunk):
        sl = slice(s, s + chunk)
        frac[sl] = top_reco(evn[sl], {k: v[sl] for k, v in lp.items()},
                            *(b[k][tag][sl] for k in ("Px", "Py", "Pz", "E")),
                            metx[sl], mety[sl], draws)
    cut(frac >= 0.5, "ttbar_reco")
    rows = {"event": ak.to_numpy(ev.event), "EventWeight": ak.to_numpy(ev.EventWeight),
            "n_jets": ak.to_numpy(ak.sum(ev.jet_good, axis=1)).astype(np.int64),
            "n_b": ak.to_numpy(ak.sum(ev.Jet_btag[ev.jet_good] > 1.0, axis=1)).astype(np.int64),
            "n_lep": ak.to_numpy(ak.sum(ev.mu_good, axis=1) + ak.sum(ev.el_good, axis=1)
                                 ).astype(np.int64),
            "lep_pt": ak.to_numpy(ev.lep.pt).astype(np.float64),
            "lep_iso": ak.to_numpy(ev.lep.iso).astype(np.float64),
            "MET_px": ak.to_numpy(ev.MET_px), "MET_py": ak.to_numpy(ev.MET_py)}
    return {"rows": rows, "jet_pt": ev.jet_pt_all[ev.jet_good], "cutflow": flow}


def load(path: str, repeat: int) -> ak.Array:
    """Every needed branch once, replicated ``repeat`` times, with a running event number."""
    with uproot.open(path) as f:
        one = f["events"].arrays(BRANCHES, library="ak")
    ev = ak.concatenate([one] * repeat) if repeat > 1 else one
    return ak.with_field(ev, np.arange(len(ev), dtype=np.int64), "event")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", default=None, help="default: scikit-hep-testdata's uproot-HZZ.root")
    ap.add_argument("--repeat", type=int, default=1, help="copies of the events (default 1)")
    ap.add_argument("--draws", type=int, default=1024)
    ap.add_argument("--out", default="selected_plain.parquet")
    args = ap.parse_args()
    t0 = time.perf_counter()
    ev = load(args.file or default_file(), args.repeat)
    t1 = time.perf_counter()
    sel = select(ev, args.draws)
    t2 = time.perf_counter()
    rows, w = sel["rows"], sel["rows"]["EventWeight"]
    met = np.hypot(rows["MET_px"], rows["MET_py"])
    hists = {"met": np.histogram(met, 20, (0, 200), weights=w)[0],
             "lep_pt": np.histogram(rows["lep_pt"], 20, (0, 200), weights=w)[0],
             "jet_pt": np.histogram(ak.to_numpy(ak.flatten(sel["jet_pt"])), 20, (0, 300),
                                    weights=ak.to_numpy(ak.flatten(ak.broadcast_arrays(
                                        ak.Array(w), sel["jet_pt"])[0])))[0],
             "n_jets": np.histogram(rows["n_jets"], np.arange(-0.5, 8.5), weights=w)[0]}
    ak.to_parquet(ak.zip(rows), args.out)
    np.savez(os.path.splitext(args.out)[0] + "_hists.npz", **hists)
    print(json.dumps({"events": len(ev), "selected": len(w), "read_s": round(t1 - t0, 3),
                      "select_s": round(t2 - t1, 3), "cutflow": sel["cutflow"]}))


if __name__ == "__main__":
    main()
