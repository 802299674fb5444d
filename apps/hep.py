"""A ttH-style event selection on real ROOT files: 17 operators with declared dependencies
(5 object selections and 12 event propositions).

Data: scikit-hep-testdata 0.3.12's ``uproot-HZZ.root`` (tree ``events``, 2,421 simulated events
with jets, muons, electrons, photons and MET) or one of its compression variants.

Object selection (maps): ``jets`` (pT > 25 GeV, |eta| < 2.5, jet ID), ``bjets`` (b-tag
discriminant > 1 among good jets), ``muons`` (pT > 20, |eta| < 2.4), ``electrons`` (pT > 20,
|eta| < 2.47), ``lepton`` (the leading selected lepton). Event propositions (filters):
``trigger``, ``pv`` (a primary vertex), ``met`` (missing ET > 20), ``n_jets`` (>= 2),
``n_bjets`` (>= 1), ``one_lepton``, ``lepton_pt`` (> 25), ``lepton_iso`` (< 3 GeV), ``z_veto``
(no opposite-charge same-flavour pair within 15 GeV of the Z mass), ``mt_w`` (lepton + MET
transverse mass > 30), ``w_window`` (a pair of good jets with 50 < m_jj < 120) and the heavy
``ttbar_reco``: the leptonic top reconstructed from the lepton, MET with the W-mass constraint on
the neutrino and the b-jet, sampled ``reco_draws`` times per event with jet-energy-scale and MET
resolution smearing (as ttH_sci samples measurement uncertainty); the event passes when at least
half of the draws put m(l nu b) within 40 GeV of the top mass. The draws are seeded by the event
number, so the selection is the same in any order and any batching.

``order: written`` lists the propositions as a physicist would (cheap, tight cuts first);
``order: poor`` lists the heavy reconstruction first and the tight cuts last. With
``adaptive: true`` the engine reorders either from measurements; with ``adaptive: false`` it runs
the order as listed.

    pairflow app=hep                      # adaptive, from the written order
    pairflow app=hep hep.order=poor hep.adaptive=false data.file=uproot-HZZ-lzma.root
"""
from __future__ import annotations

import os

import numpy as np

from pairflow.engine import Filter, Map, Pipeline
from pairflow.operators.histogram import Histogram
from pairflow.operators.parquet import ParquetSink

FILES = ("uproot-HZZ.root", "uproot-HZZ-zlib.root", "uproot-HZZ-lzma.root",
         "uproot-HZZ-lz4.root", "uproot-HZZ-zstd.root", "uproot-HZZ-uncompressed.root")

CUTS = {
    "jet_pt": 25.0, "jet_eta": 2.5, "btag": 1.0,
    "mu_pt": 20.0, "mu_eta": 2.4, "el_pt": 20.0, "el_eta": 2.47,
    "met": 20.0, "n_jets": 2, "n_bjets": 1, "lep_pt": 25.0, "lep_iso": 3.0,
    "z_mass": 91.19, "z_window": 15.0, "mt_w": 30.0, "mjj_lo": 50.0, "mjj_hi": 120.0,
    "w_mass": 80.4, "top_mass": 172.5, "top_window": 40.0, "reco_fraction": 0.5,
    "jes": 0.10, "met_sigma": 10.0,
}

BRANCHES = ["Jet_Px", "Jet_Py", "Jet_Pz", "Jet_E", "Jet_btag", "Jet_ID",
            "Muon_Px", "Muon_Py", "Muon_Pz", "Muon_E", "Muon_Charge", "Muon_Iso",
            "Electron_Px", "Electron_Py", "Electron_Pz", "Electron_E", "Electron_Charge",
            "Electron_Iso", "MET_px", "MET_py", "NPrimaryVertices", "triggerIsoMu24",
            "EventWeight"]

WRITTEN = ["trigger", "pv", "jets", "n_jets", "bjets", "n_bjets", "muons", "electrons",
           "lepton", "one_lepton", "lepton_pt", "met", "lepton_iso", "z_veto", "mt_w",
           "w_window", "ttbar_reco"]
POOR = ["jets", "bjets", "muons", "electrons", "lepton", "ttbar_reco", "w_window", "trigger",
        "pv", "lepton_iso", "mt_w", "z_veto", "lepton_pt", "one_lepton", "met", "n_jets",
        "n_bjets"]


def data_file(name: str = "uproot-HZZ.root") -> str:
    """A test file by name (one of FILES) or a path."""
    if os.path.exists(name):
        return name
    import skhep_testdata
    return skhep_testdata.data_path(name)


# -- kinematics ---------------------------------------------------------------------------------

def _np(x):
    import awkward as ak
    return ak.to_numpy(x) if type(x).__module__.startswith("awkward") else np.asarray(x)


def _pt_eta(px, py, pz):
    pt = np.hypot(px, py)
    eta = np.arcsinh(pz / np.maximum(pt, 1e-9))
    return pt, eta


def _mass(e, px, py, pz):
    return np.sqrt(np.maximum(e * e - px * px - py * py - pz * pz, 0.0))


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def gaussian_draws(events: np.ndarray, draws: int, streams: int, seed: int = 0) -> np.ndarray:
    """Standard normal draws of shape (len(events), draws, streams), a pure function of
    (event number, draw, stream, seed): counter-based (SplitMix64 + Box-Muller), so an event gets
    the same draws in any batch and any order."""
    ev = np.asarray(events, dtype=np.uint64)[:, None, None]
    d = np.arange(draws, dtype=np.uint64)[None, :, None]
    s = np.arange(streams, dtype=np.uint64)[None, None, :]
    key = (ev * np.uint64(draws * streams) + d * np.uint64(streams) + s) * np.uint64(2)
    key = key ^ _splitmix64(np.full(1, seed, dtype=np.uint64))
    h1 = _splitmix64(key)
    h2 = _splitmix64(key + np.uint64(1))
    scale = 1.0 / 9007199254740992.0  # 2**-53
    u1 = ((h1 >> np.uint64(11)).astype(np.float64) + 0.5) * scale
    u2 = (h2 >> np.uint64(11)).astype(np.float64) * scale
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


# -- object selection (maps) -------------------------------------------------------------------

def select_jets(b):
    import awkward as ak
    px, py, pz, e = b["Jet_Px"], b["Jet_Py"], b["Jet_Pz"], b["Jet_E"]
    pt, eta = _pt_eta(px, py, pz)
    good = (pt > CUTS["jet_pt"]) & (abs(eta) < CUTS["jet_eta"]) & b["Jet_ID"]
    return {"jet_px": px[good], "jet_py": py[good], "jet_pz": pz[good], "jet_e": e[good],
            "jet_pt": pt[good], "jet_btag": b["Jet_btag"][good],
            "n_jets": _np(ak.num(px[good], axis=1)).astype(np.int64)}


def select_bjets(b):
    import awkward as ak
    tag = b["jet_btag"] > CUTS["btag"]
    return {"b_px": b["jet_px"][tag], "b_py": b["jet_py"][tag], "b_pz": b["jet_pz"][tag],
            "b_e": b["jet_e"][tag], "b_pt": b["jet_pt"][tag],
            "n_b": _np(ak.num(b["jet_px"][tag], axis=1)).astype(np.int64)}


def _leptons(b, prefix, out, pt_cut, eta_cut):
    import awkward as ak
    px, py, pz = b[f"{prefix}_Px"], b[f"{prefix}_Py"], b[f"{prefix}_Pz"]
    pt, eta = _pt_eta(px, py, pz)
    good = (pt > pt_cut) & (abs(eta) < eta_cut)
    return {f"{out}_px": px[good], f"{out}_py": py[good], f"{out}_pz": pz[good],
            f"{out}_e": b[f"{prefix}_E"][good], f"{out}_pt": pt[good],
            f"{out}_charge": b[f"{prefix}_Charge"][good], f"{out}_iso": b[f"{prefix}_Iso"][good],
            f"n_{out}": _np(ak.num(px[good], axis=1)).astype(np.int64)}


def select_muons(b):
    return _leptons(b, "Muon", "mu", CUTS["mu_pt"], CUTS["mu_eta"])


def select_electrons(b):
    return _leptons(b, "Electron", "el", CUTS["el_pt"], CUTS["el_eta"])


def leading_lepton(b):
    """The selected lepton of highest pT (NaN where there is none)."""
    import awkward as ak
    out = {}
    cat = {k: ak.concatenate([b[f"mu_{k}"], b[f"el_{k}"]], axis=1)
           for k in ("px", "py", "pz", "e", "pt", "iso")}
    best = ak.argmax(cat["pt"], axis=1, keepdims=True)
    for k, v in cat.items():
        out[f"lep_{k}"] = _np(ak.fill_none(ak.firsts(v[best]), np.nan)).astype(np.float64)
    out["n_lep"] = _np(b["n_mu"] + b["n_el"]).astype(np.int64)
    return out


# -- event propositions (filters) --------------------------------------------------------------

def trigger(b):
    return _np(b["triggerIsoMu24"]).astype(bool)


def primary_vertex(b):
    return _np(b["NPrimaryVertices"]) >= 1


def met_cut(b):
    return np.hypot(_np(b["MET_px"]), _np(b["MET_py"])) > CUTS["met"]


def n_jets_cut(b):
    return b["n_jets"] >= CUTS["n_jets"]


def n_bjets_cut(b):
    return b["n_b"] >= CUTS["n_bjets"]


def one_lepton(b):
    return b["n_lep"] >= 1


def lepton_pt(b):
    return b["lep_pt"] > CUTS["lep_pt"]


def lepton_iso(b):
    return b["lep_iso"] < CUTS["lep_iso"]


def _z_pair(b, out):
    import awkward as ak
    lep = ak.zip({k: b[f"{out}_{k}"] for k in ("px", "py", "pz", "e", "charge")})
    a, c = ak.unzip(ak.combinations(lep, 2, axis=1))
    m = _mass(a.e + c.e, a.px + c.px, a.py + c.py, a.pz + c.pz)
    inside = (a.charge * c.charge < 0) & (abs(m - CUTS["z_mass"]) < CUTS["z_window"])
    return _np(ak.any(inside, axis=1))


def z_veto(b):
    return ~(_z_pair(b, "mu") | _z_pair(b, "el"))


def mt_w(b):
    mx, my = _np(b["MET_px"]).astype(np.float64), _np(b["MET_py"]).astype(np.float64)
    met = np.hypot(mx, my)
    lpx, lpy, lpt = b["lep_px"], b["lep_py"], b["lep_pt"]
    mt2 = 2.0 * (lpt * met - lpx * mx - lpy * my)
    return np.sqrt(np.maximum(mt2, 0.0)) > CUTS["mt_w"]  # NaN (no lepton) -> False


def w_window(b):
    import awkward as ak
    jets = ak.zip({k: b[f"jet_{k}"] for k in ("px", "py", "pz", "e")})
    a, c = ak.unzip(ak.combinations(jets, 2, axis=1))
    m = _mass(a.e + c.e, a.px + c.px, a.py + c.py, a.pz + c.pz)
    return _np(ak.any((m > CUTS["mjj_lo"]) & (m < CUTS["mjj_hi"]), axis=1))


def top_masses(b, draws: int, seed: int = 0) -> np.ndarray:
    """m(l nu b) per event and draw, (n, draws): NaN where the event has no lepton or b-jet.

    Per draw: jet energy scale 1 + jes*z for each of the two leading b-jets, MET smeared by
    met_sigma*z per component; the neutrino pz solves m(l nu) = m_W (the real part when the
    discriminant is negative; the smaller |pz| otherwise); of the b-jets, the one giving m(l nu b)
    closest to the top mass."""
    import awkward as ak
    n = len(b)
    lpx, lpy, lpz, le = (np.asarray(b[f"lep_{k}"], np.float64)[:, None]
                         for k in ("px", "py", "pz", "e"))
    bj = {k: ak.to_numpy(ak.fill_none(ak.pad_none(b[f"b_{k}"], 2, axis=1, clip=True), np.nan)
                         ).astype(np.float64) for k in ("px", "py", "pz", "e")}
    z = gaussian_draws(np.asarray(b["event"]), draws, 4, seed)          # (n, K, 4)
    nux = _np(b["MET_px"]).astype(np.float64)[:, None] + CUTS["met_sigma"] * z[:, :, 2]
    nuy = _np(b["MET_py"]).astype(np.float64)[:, None] + CUTS["met_sigma"] * z[:, :, 3]
    mw = CUTS["w_mass"]
    lpt2 = lpx * lpx + lpy * lpy
    mu = 0.5 * mw * mw + lpx * nux + lpy * nuy
    a = mu * lpz / lpt2
    disc = a * a - (le * le * (nux * nux + nuy * nuy) - mu * mu) / lpt2
    root = np.sqrt(np.maximum(disc, 0.0))
    pz1, pz2 = a - root, a + root
    nuz = np.where(np.abs(pz1) < np.abs(pz2), pz1, pz2)
    nue = np.sqrt(nux * nux + nuy * nuy + nuz * nuz)
    wx, wy, wz, we = lpx + nux, lpy + nuy, lpz + nuz, le + nue
    best = np.full((n, draws), np.nan)
    best_d = np.full((n, draws), np.inf)
    for j in range(2):
        s = 1.0 + CUTS["jes"] * z[:, :, j]
        m = _mass(we + s * bj["e"][:, j:j + 1], wx + s * bj["px"][:, j:j + 1],
                  wy + s * bj["py"][:, j:j + 1], wz + s * bj["pz"][:, j:j + 1])
        d = np.abs(m - CUTS["top_mass"])
        d = np.where(np.isnan(d), np.inf, d)
        take = d < best_d
        best = np.where(take, m, best)
        best_d = np.where(take, d, best_d)
    return best


def make_ttbar_reco(draws: int, seed: int = 0):
    def ttbar_reco(b):
        m = top_masses(b, draws, seed)
        inside = np.abs(m - CUTS["top_mass"]) < CUTS["top_window"]  # NaN -> False
        return inside.mean(axis=1) >= CUTS["reco_fraction"]
    return ttbar_reco


def propositions(reco_draws: int = 1024, seed: int = 0) -> dict:
    """Every operator by name (maps and filters with their dependencies)."""
    ops = [
        Map("jets", select_jets),
        Map("bjets", select_bjets, after=["jets"]),
        Map("muons", select_muons),
        Map("electrons", select_electrons),
        Map("lepton", leading_lepton, after=["muons", "electrons"]),
        Filter("trigger", trigger),
        Filter("pv", primary_vertex),
        Filter("met", met_cut),
        Filter("n_jets", n_jets_cut, after=["jets"]),
        Filter("n_bjets", n_bjets_cut, after=["bjets"]),
        Filter("one_lepton", one_lepton, after=["lepton"]),
        Filter("lepton_pt", lepton_pt, after=["lepton"]),
        Filter("lepton_iso", lepton_iso, after=["lepton"]),
        Filter("z_veto", z_veto, after=["muons", "electrons"]),
        Filter("mt_w", mt_w, after=["lepton"]),
        Filter("w_window", w_window, after=["jets"]),
        Filter("ttbar_reco", make_ttbar_reco(reco_draws, seed), after=["bjets", "lepton"]),
    ]
    return {o.name: o for o in ops}


PRESELECTION = ["trigger", "pv", "met", "jets", "n_jets"]


def operators(order: str | list = "written", reco_draws: int = 1024, seed: int = 0,
              selection: str = "full") -> list:
    """The operators listed in the written (sensible) order, the poor order, or a given one.
    ``selection="preselection"`` keeps only the trigger, vertex, MET and jet-count cuts (a light
    selection, for the read-heavy variant)."""
    names = {"written": WRITTEN, "poor": POOR}.get(order, order) \
        if isinstance(order, str) else list(order)
    if isinstance(names, str):
        raise ValueError(f"order must be 'written', 'poor' or a list of names, got {order!r}")
    ops = propositions(reco_draws, seed)
    if selection == "preselection":
        ops = {k: v for k, v in ops.items() if k in PRESELECTION}
        names = [n for n in names if n in ops]
    elif selection != "full":
        raise ValueError(f"selection must be 'full' or 'preselection', got {selection!r}")
    if sorted(names) != sorted(ops):
        raise ValueError(f"an order must list every operator once: {sorted(ops)}")
    return [ops[n] for n in names]


OUTPUT_COLUMNS = ["event", "EventWeight", "n_jets", "n_b", "n_lep", "lep_pt", "lep_iso",
                  "MET_px", "MET_py"]


def sinks(selection: str = "full"):
    if selection == "preselection":
        return [ParquetSink("selected.parquet", columns=["event", "EventWeight", "n_jets"]),
                Histogram("n_jets", "n_jets", bins=np.arange(-0.5, 8.5), weight="EventWeight")]
    return [ParquetSink("selected.parquet", columns=OUTPUT_COLUMNS),
            Histogram("met", lambda b: np.hypot(_np(b["MET_px"]), _np(b["MET_py"])),
                      bins=20, range=(0, 200), weight="EventWeight"),
            Histogram("lep_pt", "lep_pt", bins=20, range=(0, 200), weight="EventWeight"),
            Histogram("jet_pt", "jet_pt", bins=20, range=(0, 300), weight="EventWeight"),
            Histogram("n_jets", "n_jets", bins=np.arange(-0.5, 8.5), weight="EventWeight")]


def hep_pipeline(file: str = "uproot-HZZ.root", order: str | list = "written",
                 adaptive: bool = True, reco_draws: int = 1024, seed: int = 0,
                 step_size: int = 500, repeat: int = 1, tree: str = "events",
                 columns=None, selection: str = "full", branches: str = "used",
                 keep_open: bool = True, **options) -> Pipeline:
    """The selection as a Pipeline (``.run()`` it). ``options`` are PipelineConfig fields.
    ``branches="all"`` reads every branch (MC truth included), ``keep_open=False`` reopens the
    file for every batch: both make reading heavier (the read-heavy benchmark variant)."""
    from pairflow.operators.root import RootSource
    files = [data_file(f) for f in ([file] if isinstance(file, str) else file)]
    if branches not in ("used", "all"):
        raise ValueError(f"branches must be 'used' or 'all', got {branches!r}")
    source = RootSource(files, tree=tree, branches=BRANCHES if branches == "used" else None,
                        step_size=step_size, repeat=repeat, keep_open=keep_open)
    ops = operators(order, reco_draws, seed, selection)
    options.setdefault("order", "adaptive" if adaptive else "written")
    options.setdefault("weight", "EventWeight")
    options.setdefault("name", "hep")
    if columns is None:
        columns = OUTPUT_COLUMNS + ["jet_pt"] if selection == "full" else \
            ["event", "EventWeight", "n_jets"]
    return Pipeline(source, ops, sinks(selection), columns=columns, **options)


def run(cfg, run_dir: str | None = None):
    """The Hydra entry point (``pairflow app=hep``)."""
    from omegaconf import OmegaConf

    from pairflow.apps.options import executor_options, runtime_options
    d, h = cfg.data, cfg.hep
    options = dict(OmegaConf.to_container(cfg.get("pipeline", {}) or {}, resolve=True))
    options = {k: v for k, v in options.items() if v is not None}
    # the cluster group's executor (auto: in-process or Ray by the work, as for all-pairs),
    # unless pipeline.executor names one
    options = {**executor_options(cfg), **options, **runtime_options(cfg)}
    p = hep_pipeline(file=str(d.file), order=h.order if isinstance(h.order, str)
                     else list(h.order), adaptive=bool(h.adaptive),
                     reco_draws=int(h.reco_draws), seed=int(h.seed), step_size=int(d.step_size),
                     repeat=int(d.repeat), tree=str(d.tree),
                     selection=str(h.get("selection", "full")),
                     branches=str(d.get("branches", "used")),
                     keep_open=bool(d.get("keep_open", True)), **options)
    return p.run(run_dir=run_dir, progress=bool(cfg.get("progress", True)),
                 runs_root=str(cfg.get("runs_root", "runs")),
                 config_dump=OmegaConf.to_container(cfg, resolve=True))


def report(result) -> str:
    s = result.summary
    lines = [f"app=hep events={s['records_in']} selected={s['records_selected']} "
             f"(weighted {s['weight_selected']:.4g}) batches={s['batches']}",
             f"wall time {s['wall_s']:.2f} s; operator time {s['op_seconds']:.2f} s; "
             f"{s['distinct_orders']} distinct order(s), {s['replans']} re-plans; executor "
             f"{s.get('executor')}" + (f" ({s['threads']} threads)" if s.get("threads") else
                                      f" ({s['slots']} slots)" if s.get("slots") else ""),
             *s["order_report"]["lines"]]
    if "balance" in s:
        b = s["balance"]
        lines.append(f"DS/DP: {b['final_ds']} reading / {b['final_dp']} processing of "
                     f"{b['slots']} slots after {len(b['checkpoints'])} checkpoints")
    lines.append("cutflow (records in -> passed, as run):")
    for row in result.cutflow.itertuples():
        if row.kind == "filter":
            lines.append(f"  {row.op:<12} {row.records_in:>8} -> {row.passed:>8}")
    for name, path in s["outputs"].items():
        lines.append(f"{name}: {path}")
    return "\n".join(lines)
