"""app=phylogeny without Ray: bad input is named (file and record) before any compute."""
import numpy as np
import pytest

from pairflow.apps.phylogeny import PhylogenyApp, nj_newick
from pairflow.engine.errors import InputError


def _fasta(path, records):
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in records))
    return str(path)


def _check(app):
    for key in app.keys():
        with open(app.url(key), "rb") as fh:
            app.check(key, fh.read())


def test_a_genome_given_instead_of_its_proteins_is_named(tmp_path):
    good = _fasta(tmp_path / "good.faa", [("p1", "MKVLAAGIVGLLLAQSTHW")])
    dna = _fasta(tmp_path / "genome.fna", [("chr1", "ACGTTGCAACGTNNACGTAC" * 5)])
    app = PhylogenyApp([good, dna])
    with pytest.raises(InputError, match=r"genome\.fna: record 'chr1' \(#1\): looks like DNA"):
        _check(app)


def test_a_proteome_without_one_k_word_is_named(tmp_path):
    short = _fasta(tmp_path / "short.faa", [("a", "MKVL"), ("b", "MKVXLAAG"), ("c", "WW*WW")])
    app = PhylogenyApp([short], k=5)
    with pytest.raises(InputError, match=r"short\.faa: record 'a' \(#1\): no 5-word"):
        _check(app)
    _check(PhylogenyApp([short], k=4))  # 'LAAG' is a 4-word of standard residues


def test_inputs_and_k_are_validated(tmp_path):
    a = _fasta(tmp_path / "x.faa", [("p", "MKVLAAGIVG")])
    (tmp_path / "sub").mkdir()
    b = _fasta(tmp_path / "sub" / "x.faa", [("p", "MKVLAAGIVG")])
    with pytest.raises(InputError, match="same name 'x'"):
        PhylogenyApp([a, b])
    for k in (2, 8, "5", 5.0, True):
        with pytest.raises(ValueError, match="k must be an integer from 3 to 7"):
            PhylogenyApp([a], k=k)
    with pytest.raises(InputError, match="no input files"):
        PhylogenyApp([])


def test_neighbour_joining_of_an_additive_matrix_recovers_its_tree():
    """Four taxa on a tree ((a:1,b:2):3,(c:1,d:1)): NJ is exact on additive distances, so the
    Newick holds the split ab|cd and the pendant lengths."""
    import dendropy
    d = np.array([[0, 3, 5, 5], [3, 0, 6, 6], [5, 6, 0, 2], [5, 6, 2, 0]], float)
    tree = dendropy.Tree.get(data=nj_newick(d, ["a", "b", "c", "d"]), schema="newick")
    tree.encode_bipartitions()
    taxa = tree.taxon_namespace
    ab = taxa.taxa_bitmask(labels=["a", "b"])
    splits = {b.split_bitmask for b in tree.bipartition_encoding}
    assert ab in splits or (~ab & taxa.all_taxa_bitmask()) in splits
    lengths = {n.taxon.label: n.edge.length for n in tree.leaf_node_iter()}
    assert lengths == pytest.approx({"a": 1.0, "b": 2.0, "c": 1.0, "d": 1.0})
