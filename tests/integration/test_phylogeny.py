"""app=phylogeny on the 16 predicted ragout proteomes: distances equal a dense brute force, the
tree puts each species in one clade and matches the brute-force distances' tree exactly."""
import glob
import os

import numpy as np
import pytest

from tests.conftest import SETUP
from tests.oracles import PROTEOMES
from tests.unit.cvtree_oracle import dense_distances, dense_vector, read_proteins

pytestmark = pytest.mark.ray


def _proteome_paths():
    paths = sorted(glob.glob(os.path.join(PROTEOMES, "*", "*.faa")))
    if len(paths) != 16:
        pytest.fail(f"the 16 proteomes are not in {PROTEOMES} (found {len(paths)}); {SETUP}",
                    pytrace=False)
    return paths


def _bipartitions(tree):
    tree.encode_bipartitions()
    return {b.split_bitmask for b in tree.bipartition_encoding}


def _is_clade(tree, labels):
    """An unrooted tree has a clade of ``labels`` when one edge splits them from the rest."""
    taxa = tree.taxon_namespace
    mask = taxa.taxa_bitmask(labels=labels)
    splits = _bipartitions(tree)
    return mask in splits or (~mask & taxa.all_taxa_bitmask()) in splits


@pytest.mark.slow
def test_sixteen_proteomes_tree_and_distances(ray_local, tmp_path):
    import dendropy
    from dendropy.calculate.treecompare import symmetric_difference
    from hydra import compose, initialize_config_dir

    from pairflow.apps.cli import CONFIG_DIR, run_config
    from pairflow.apps.resolvers import register_resolvers
    paths = _proteome_paths()
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "app=phylogeny", "progress=false", f"runs_root={tmp_path}"])
    module, res = run_config(cfg, str(tmp_path / "run"))
    stems = [os.path.basename(p)[:-4] for p in paths]
    species = {os.path.basename(p)[:-4]: os.path.basename(os.path.dirname(p)) for p in paths}

    got = res.matrix("distance")
    want = dense_distances([dense_vector(read_proteins(p), 5) for p in paths])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)

    taxa = dendropy.TaxonNamespace()
    tree = dendropy.Tree.get(path=res.outputs["tree"], schema="newick", taxon_namespace=taxa,
                             preserve_underscores=True)
    assert sorted(t.label for t in taxa) == sorted(stems)
    for name in set(species.values()):
        strains = [s for s in stems if species[s] == name]
        assert _is_clade(tree, strains), (name, strains)

    csv = tmp_path / "bruteforce.csv"
    csv.write_text("," + ",".join(stems) + "\n" + "".join(
        s + "," + ",".join(f"{x:.17g}" for x in row) + "\n" for s, row in zip(stems, want)))
    oracle_tree = dendropy.PhylogeneticDistanceMatrix.from_csv(
        str(csv), taxon_namespace=taxa, is_allow_new_taxa=False).nj_tree()
    assert symmetric_difference(tree, oracle_tree) == 0
    text = module.report(res)
    assert "app=phylogeny n=16 proteomes k=5" in text and "tree.nwk" in text


def test_bad_proteome_fails_before_compute(ray_local, tmp_path):
    from pairflow.apps.phylogeny import phylogeny
    from pairflow.engine.errors import InputError
    good = tmp_path / "good.faa"
    good.write_text(">p1\nMKVLAAGIVGLLLAQSTHWKRDE\n>p2\nMSTNPKPQRKTKRNTNRRPQDVK\n")
    genome = tmp_path / "genome.fa"
    genome.write_text(">chr\n" + "ACGTTGCAAC" * 30 + "\n")
    runs = tmp_path / "runs"
    with pytest.raises(InputError, match=r"genome\.fa: record 'chr' \(#1\): looks like DNA"):
        phylogeny([str(good), str(genome)], runs_root=str(runs), progress=False)
    done = glob.glob(str(runs / "*" / "*" / "tiles.jsonl"))
    assert all(os.path.getsize(p) == 0 for p in done)  # no tile was computed
