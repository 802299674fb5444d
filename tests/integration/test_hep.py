"""The ttH-style selection on real ROOT events equals a straightforward fixed-order implementation,
in every order the engine chooses.

The reference below is written from the physics, not from apps/hep.py: its cuts, the branches it
reads, the counter-based random draws of the top reconstruction and the operator orders are all
spelled out here, so a wrong constant in the app cannot also be wrong in its oracle.
"""
import json
import os

import numpy as np
import pytest

from tests.conftest import need_module

pytestmark = pytest.mark.ray

ak = need_module("awkward")
uproot = need_module("uproot")
skhep_testdata = need_module("skhep_testdata")

from pairflow.apps.hep import hep_pipeline  # noqa: E402

DRAWS = 32
EVENTS_IN_FILE = 2421  # uproot-HZZ.root's tree "events"

# The selection, as a physicist states it (GeV; |eta| unitless).
JET_PT, JET_ETA, BTAG = 25.0, 2.5, 1.0            # good jets (with jet ID); b-tag discriminant
MU_PT, MU_ETA, EL_PT, EL_ETA = 20.0, 2.4, 20.0, 2.47
MET_MIN, N_JETS, N_BJETS = 20.0, 2, 1
LEPTON_PT, LEPTON_ISO = 25.0, 3.0
Z_MASS, Z_WINDOW = 91.19, 15.0                    # veto an opposite-charge same-flavour pair
MT_W = 30.0
MJJ_LO, MJJ_HI = 50.0, 120.0                      # a hadronic W candidate among good jets
W_MASS, TOP_MASS, TOP_WINDOW = 80.4, 172.5, 40.0
RECO_FRACTION = 0.5                               # of the draws within the top window
JES, MET_SIGMA = 0.10, 10.0                       # smearing: jet energy scale, MET resolution

# The operators in the order a physicist writes them, and the poor order (heavy work first).
WRITTEN = ["trigger", "pv", "jets", "n_jets", "bjets", "n_bjets", "muons", "electrons",
           "lepton", "one_lepton", "lepton_pt", "met", "lepton_iso", "z_veto", "mt_w",
           "w_window", "ttbar_reco"]
POOR = ["jets", "bjets", "muons", "electrons", "lepton", "ttbar_reco", "w_window", "trigger",
        "pv", "lepton_iso", "mt_w", "z_veto", "lepton_pt", "one_lepton", "met", "n_jets",
        "n_bjets"]
OBJECT_MAPS = ("jets", "bjets", "muons", "electrons", "lepton")
FILTERS = [n for n in WRITTEN if n not in OBJECT_MAPS]


def splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def normal_draws(events, draws, streams, seed):
    """The documented draws: standard normals indexed by (event, draw, stream), each from two
    SplitMix64 hashes of a counter (Box-Muller), so any batching gives the same numbers."""
    ev = np.asarray(events, dtype=np.uint64)[:, None, None]
    d = np.arange(draws, dtype=np.uint64)[None, :, None]
    s = np.arange(streams, dtype=np.uint64)[None, None, :]
    counter = (ev * np.uint64(draws * streams) + d * np.uint64(streams) + s) * np.uint64(2)
    counter = counter ^ splitmix64(np.full(1, seed, dtype=np.uint64))
    u1 = ((splitmix64(counter) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    u2 = (splitmix64(counter + np.uint64(1)) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def reference(path: str, draws: int = DRAWS, seed: int = 0):
    """Every proposition on every event of the file at once, applied in the written order."""
    branches = [f"{obj}_{v}" for obj in ("Jet", "Muon", "Electron")
                for v in ("Px", "Py", "Pz", "E")]
    branches += ["Jet_btag", "Jet_ID", "Muon_Charge", "Muon_Iso", "Electron_Charge",
                 "Electron_Iso", "MET_px", "MET_py", "NPrimaryVertices", "triggerIsoMu24",
                 "EventWeight"]
    ev = uproot.open(path)["events"].arrays(branches, library="ak")
    n = len(ev)
    event = np.arange(n)

    def objects(prefix, pt_cut, eta_cut, extra):
        px, py, pz = ev[f"{prefix}_Px"], ev[f"{prefix}_Py"], ev[f"{prefix}_Pz"]
        pt = np.hypot(px, py)
        eta = np.arcsinh(pz / np.maximum(pt, 1e-9))
        good = (pt > pt_cut) & (abs(eta) < eta_cut)
        if prefix == "Jet":
            good = good & ev.Jet_ID
        fields = {"px": px, "py": py, "pz": pz, "e": ev[f"{prefix}_E"], "pt": pt}
        fields.update({k: ev[f"{prefix}_{v}"] for k, v in extra.items()})
        return ak.zip(fields)[good]

    jets = objects("Jet", JET_PT, JET_ETA, {"btag": "btag"})
    bjets = jets[jets.btag > BTAG]
    mus = objects("Muon", MU_PT, MU_ETA, {"charge": "Charge", "iso": "Iso"})
    els = objects("Electron", EL_PT, EL_ETA, {"charge": "Charge", "iso": "Iso"})
    leptons = ak.concatenate([mus, els], axis=1)
    lead = ak.firsts(leptons[ak.argmax(leptons.pt, axis=1, keepdims=True)])
    lep = {k: ak.to_numpy(ak.fill_none(lead[k], np.nan)).astype(np.float64)
           for k in ("px", "py", "pz", "e", "pt", "iso")}
    mx, my = ak.to_numpy(ev.MET_px).astype(np.float64), ak.to_numpy(ev.MET_py).astype(np.float64)

    def mass(p):
        return np.sqrt(np.maximum(p.e ** 2 - p.px ** 2 - p.py ** 2 - p.pz ** 2, 0.0))

    def z_pair(lst):
        a, b = ak.unzip(ak.combinations(lst, 2))
        m = mass(ak.zip({k: a[k] + b[k] for k in ("px", "py", "pz", "e")}))
        return ak.to_numpy(ak.any((a.charge * b.charge < 0)
                                  & (abs(m - Z_MASS) < Z_WINDOW), axis=1))

    a, b = ak.unzip(ak.combinations(jets, 2))
    mjj = mass(ak.zip({k: a[k] + b[k] for k in ("px", "py", "pz", "e")}))

    # the heavy reconstruction, written out directly: per draw, smear, solve the neutrino pz
    z = normal_draws(event, draws, 4, seed)  # streams: JES of b-jet 0 and 1, MET x and y
    nux = mx[:, None] + MET_SIGMA * z[:, :, 2]
    nuy = my[:, None] + MET_SIGMA * z[:, :, 3]
    lx, ly, lz, le = (lep[k][:, None] for k in ("px", "py", "pz", "e"))
    mu = W_MASS ** 2 / 2 + lx * nux + ly * nuy
    pt2 = lx ** 2 + ly ** 2
    centre = mu * lz / pt2
    root = np.sqrt(np.maximum(centre ** 2 - (le ** 2 * (nux ** 2 + nuy ** 2) - mu ** 2) / pt2, 0))
    nuz = np.where(np.abs(centre - root) < np.abs(centre + root), centre - root, centre + root)
    nue = np.sqrt(nux ** 2 + nuy ** 2 + nuz ** 2)
    padded = ak.pad_none(bjets, 2, clip=True)
    best = np.full((n, draws), np.nan)
    best_d = np.full((n, draws), np.inf)
    for j in range(2):
        bq = {k: ak.to_numpy(ak.fill_none(padded[k][:, j], np.nan)).astype(np.float64)[:, None]
              for k in ("px", "py", "pz", "e")}
        s = 1 + JES * z[:, :, j]
        e = le + nue + s * bq["e"]
        px, py, pz = lx + nux + s * bq["px"], ly + nuy + s * bq["py"], lz + nuz + s * bq["pz"]
        m = np.sqrt(np.maximum(e ** 2 - px ** 2 - py ** 2 - pz ** 2, 0))
        d = np.abs(m - TOP_MASS)
        d[np.isnan(d)] = np.inf
        best = np.where(d < best_d, m, best)
        best_d = np.minimum(d, best_d)
    reco = (np.abs(best - TOP_MASS) < TOP_WINDOW).mean(axis=1) >= RECO_FRACTION

    met = np.hypot(ak.to_numpy(ev.MET_px), ak.to_numpy(ev.MET_py))
    mt = np.sqrt(np.maximum(2 * (lep["pt"] * np.hypot(mx, my) - lep["px"] * mx - lep["py"] * my),
                            0))
    cuts = {
        "trigger": ak.to_numpy(ev.triggerIsoMu24),
        "pv": ak.to_numpy(ev.NPrimaryVertices) >= 1,
        "n_jets": ak.to_numpy(ak.num(jets)) >= N_JETS,
        "n_bjets": ak.to_numpy(ak.num(bjets)) >= N_BJETS,
        "one_lepton": ak.to_numpy(ak.num(leptons)) >= 1,
        "lepton_pt": lep["pt"] > LEPTON_PT,
        "met": met > MET_MIN,
        "lepton_iso": lep["iso"] < LEPTON_ISO,
        "z_veto": ~(z_pair(mus) | z_pair(els)),
        "mt_w": mt > MT_W,
        "w_window": ak.to_numpy(ak.any((mjj > MJJ_LO) & (mjj < MJJ_HI), axis=1)),
        "ttbar_reco": reco,
    }
    alive = np.ones(n, bool)
    flow = {}
    for name in FILTERS:
        alive &= cuts[name]
        flow[name] = int(alive.sum())
    weight = float(ak.to_numpy(ev.EventWeight)[alive].sum())
    return event[alive], flow, weight


@pytest.fixture(scope="module")
def ref():
    path = skhep_testdata.data_path("uproot-HZZ.root")
    return reference(path)


def test_reference_is_a_real_selection(ref):
    events, flow, _ = ref
    assert 10 < len(events) < 200, flow  # something survives, most does not
    assert list(flow.values()) == sorted(flow.values(), reverse=True)


def test_adaptive_run_from_the_poor_order_selects_the_reference_events(ray_local, runs, ref):
    """The orders come from measured costs: 20/20 passed with the other core busy:
    `taskset -c 1 python -c 'while True: pass' &`, then `pytest -p no:cacheprovider -q
    --count=20` on this test (pytest-repeat; 2026-11-24, the machine also running other
    developers' tests, load average about 30)."""
    events, flow, weight = ref
    p = hep_pipeline(order="poor", adaptive=True, reco_draws=DRAWS, step_size=250,
                     replan_every=1, slots=3, sample_rate=0.02, progress=False, runs_root=runs)
    res = p.run()
    got = np.sort(np.asarray(res.selected["event"]))
    assert np.array_equal(got, events)
    assert res.n_selected == len(events) == flow["ttbar_reco"]
    assert res.summary["weight_selected"] == pytest.approx(weight, rel=1e-5)
    # the run moved away from the poor order: the heavy reconstruction is no longer first
    assert all(o != POOR for o in res.orders), res.orders
    final = res.summary["final_order"]
    assert final.index("ttbar_reco") > final.index("n_bjets")
    # per-operator work: the reconstruction saw far fewer events than a fixed poor order would
    reco = res.cutflow.set_index("op").loc["ttbar_reco"]
    assert reco.records_in < 0.5 * EVENTS_IN_FILE
    # the run directory tells the dashboard the order over time
    lines = [json.loads(x) for x in open(os.path.join(res.run_dir, "pipeline.jsonl"))]
    assert lines[0]["order"] == POOR and len(lines) >= 3
    assert set(lines[-1]["ops"]["ttbar_reco"]) >= {"cost_s", "pass_rate", "records_in"}
    meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
    assert meta["kind"] == "pipeline" and meta["app"] == "hep"
    assert json.load(open(os.path.join(res.run_dir, "status.json")))["state"] == "finished"
    import pandas as pd
    sel = pd.read_parquet(res.outputs["parquet"])
    assert np.array_equal(np.sort(sel["event"].to_numpy()), events)
    hist = res.histograms["n_jets"]
    assert sum(hist["counts"]) == pytest.approx(weight, rel=1e-5)

    # every order the engine used selects exactly the same events (each run as a fixed order)
    for order in res.orders:
        fixed = hep_pipeline(order=order, adaptive=False, reco_draws=DRAWS,
                             step_size=EVENTS_IN_FILE, executor="local", progress=False,
                             runs_root=runs).run()
        assert np.array_equal(np.sort(np.asarray(fixed.selected["event"])), events), order


def test_written_order_cutflow_equals_the_reference_cutflow(runs, ref):
    events, flow, _ = ref
    res = hep_pipeline(order="written", adaptive=False, reco_draws=DRAWS,
                       step_size=EVENTS_IN_FILE, executor="local", progress=False,
                       runs_root=runs).run()
    cut = res.cutflow.set_index("op")
    assert list(cut.index) == WRITTEN
    assert {name: int(cut.loc[name, "passed"]) for name in FILTERS} == flow
    assert res.n_selected == len(events)


def test_hydra_entry_point_on_a_compression_variant(ray_local, tmp_path, ref):
    from hydra import compose, initialize_config_dir
    from pairflow.apps.cli import CONFIG_DIR, run_config
    from pairflow.apps.resolvers import register_resolvers
    events, flow, _ = ref
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "app=hep_poor", "data.file=uproot-HZZ-lzma.root", f"hep.reco_draws={DRAWS}",
            "data.step_size=1000", "progress=false", f"runs_root={tmp_path}"])
    module, res = run_config(cfg, str(tmp_path / "run"))
    assert res.summary["final_order"] == POOR  # app=hep_poor runs the poor order as written
    assert np.array_equal(np.sort(np.asarray(res.selected["event"])), events)
    text = module.report(res)
    assert f"selected={len(events)}" in text and "ttbar_reco" in text


def _expected_per_event(order, ops, batches, events):
    """sum_i c_i * prod_{j<i} p_j over the filters before i: the cost per event of an order
    from each operator's measured cost per record and pass rate (maps pass everything), plus
    every operator's fixed cost per call once per batch."""
    total = sum(op["overhead_s"] or 0.0 for op in ops.values()) * batches / events
    alive = 1.0
    for name in order:
        total += ops[name]["cost_s"] * alive
        if name not in OBJECT_MAPS:
            alive *= ops[name]["pass_rate"]
    return total


def test_the_poor_order_run_shows_its_work(runs, ref, capfd):
    """`app=hep hep.order=poor`: the written order, the chosen one and the cost per event of
    each, printed at the end and kept in summary.json (issue 19)."""
    events, _, _ = ref
    res = hep_pipeline(order="poor", adaptive=True, reco_draws=DRAWS, step_size=250,
                       replan_every=1, sample_rate=0.02, executor="local", progress=True,
                       runs_root=runs).run()
    assert np.array_equal(np.sort(np.asarray(res.selected["event"])), events)
    rep = res.summary["order_report"]
    assert rep["written"]["order"] == POOR and rep["mode"] == "adaptive"
    assert rep["chosen"]["order"] == res.summary["final_order"] != POOR
    # each expected cost is the cost model over the measured operator figures, recomputed here
    ops = res.summary["ops"]
    for which in ("written", "chosen"):
        assert rep[which]["expected_s"] == pytest.approx(
            _expected_per_event(rep[which]["order"], ops, res.summary["batches"],
                                res.summary["records_in"]), rel=1e-9)
    # the chosen order moves the heavy reconstruction behind the tight cuts, and is expected
    # to cost less (how much less is measured: 48-60 % here, which is no test's to assert)
    chosen = rep["chosen"]["order"]
    assert chosen.index("ttbar_reco") > max(chosen.index("n_jets"), chosen.index("n_bjets"))
    assert rep["saved"] == pytest.approx(
        1 - rep["chosen"]["expected_s"] / rep["written"]["expected_s"]) and rep["saved"] > 0
    # measured over the batches that ran each order (every event under one order), and over
    # the whole run: the operators' seconds outside the sample, per event read
    assert rep["chosen"]["events"] + rep["written"]["events"] <= res.summary["records_in"]
    assert rep["chosen"]["measured_s"] is None or rep["chosen"]["measured_s"] > 0
    ran = sum(op["total"]["seconds"] for op in ops.values())
    assert rep["as_run"]["measured_s"] == pytest.approx(ran / EVENTS_IN_FILE, rel=1e-9)
    assert rep["as_run"]["orders"] == res.summary["distinct_orders"]
    err = capfd.readouterr().err
    assert "[pairflow] written order: " + " > ".join(POOR) in err
    assert "[pairflow] chosen order: " + " > ".join(rep["chosen"]["order"]) in err
    assert "expected" in err and "saves" in err and "as run (" in err
    with open(os.path.join(res.run_dir, "summary.json")) as f:
        assert json.load(f)["order_report"]["written"]["order"] == POOR


def test_a_fixed_order_measures_what_it_ran(runs):
    """Run as written, the report has one order, measured over every event: its operator
    seconds (no sample in a fixed run) per event read."""
    res = hep_pipeline(order="poor", adaptive=False, reco_draws=DRAWS, step_size=EVENTS_IN_FILE,
                       executor="local", progress=False, runs_root=runs).run()
    rep = res.summary["order_report"]
    assert rep["written"]["order"] == rep["chosen"]["order"] == POOR and rep["mode"] == "fixed"
    assert rep["written"]["events"] == res.summary["records_in"] == EVENTS_IN_FILE
    ran = sum(op["total"]["seconds"] for op in res.summary["ops"].values())
    assert rep["written"]["measured_s"] == pytest.approx(ran / EVENTS_IN_FILE, rel=1e-9)
    assert rep["as_run"]["measured_s"] == pytest.approx(rep["written"]["measured_s"])
    assert rep["saved"] == pytest.approx(0.0) and len(rep["lines"]) == 1
