"""Alignment-free phylogeny of whole proteomes by composition vectors (CVTree), all pairs.

    pairflow app=phylogeny                                   # the 16 predicted ragout proteomes
    pairflow app=phylogeny data.inputs='proteomes/*.faa' data.k=6

An item is a proteome: one protein FASTA file, named by its file stem. ``parse`` turns it into
its sparse composition vector (``kernels.composition``: the occurring k-words with their
components and the occurring (k−1)-words, a few tens of MB however large 20^k is), which the
host tier shares; ``compare`` gives CVTree's distance (1 − cos θ) / 2 for each pair of a tile.
After the run the distance matrix (the dense sink, field ``distance``) becomes a neighbour-joining
tree (scikit-bio) written as ``result/tree.nwk``.

Bad input stops the run before compute, naming the file and record: a nucleotide file given
where a proteome is wanted (the usual slip: the genome instead of its predicted proteins), a
proteome with no k-word of standard amino acids, two inputs with the same stem.
"""
from __future__ import annotations

import os

import numpy as np

from pairflow.engine import InputError
from pairflow.apps.file_items import FileItemsApp
from pairflow.kernels.composition import (K_RANGE, CompositionVector, composition_vector,
                                 cv_distance_matrix, encode_proteins)
from pairflow.operators.sequences import file_stem, read_records

# A file whose letters are at least this fraction A/C/G/T/U/N is nucleotide, not protein: in a
# proteome those letters are five amino acids (alanine, cysteine, glycine, threonine, asparagine)
# among twenty, far from this fraction.
NUCLEOTIDE_FRACTION = 0.9
_NUCLEOTIDES = np.zeros(256, dtype=bool)
_NUCLEOTIDES[list(b"ACGTUNacgtun")] = True

# Two protein sequences for the warm-up: their vectors are small, but at the app's k they take
# the kernels' code paths a whole proteome takes.
_WARMUP_PROTEINS = (
    b"MAIDENKQKALAAALGQIEKQFGKGSIMRLGEDRSMDVETISTGSLSLDIALGAGGLPMGRIVEIYGPESSGKTTLTLQV"
    b"IAAAQREGKTCAFIDAEHALDPIYARKLGVDIDNLLCSQPDTGEQALEICDALARSGAVDVIVVDSVAALTPKAEIEGEI"
    b"GDSHMGLAARMMSQAMRKLAGNLKQSNTLLIFINQIRMKIGVMFGNPETTTGGNALKFYASVRLDIRRIGAVKEGENVVG"
    b"SETRVKVVKNKIAAPFKQAEFQILYGEGINFYGELVDLGVKEKLIEKAGAWYSYKGEKIGQGKANATAWLKDNPETAKEI"
    b"EKKVRELLLSNPNSTPDFSVDDSEGVAETNEDF",
    b"MVTALSDVNNTDNYGAGQIQVLEGLEAVRKRPGMYIGSTSERGLHHLVWEIVDNSIDEALAGYANQIEVVIEKDNWIKVT"
    b"DNGRGIPVDIQEKMGRPAVEVILTVLHAGGKFGGGGYKVSGGLHGVGSSVVNALSQDLEVYVHRNETIYHQAYKKGVPQF"
    b"DLKEVGTTDKTGTVIRFKADGEIFTETTVYNYETLQQRIRELAFLNKGIQITLRDERDEENVREDSYHYEGG")


def _nucleotide_fraction(records) -> float:
    letters = np.concatenate([np.frombuffer(bytes(r.sequence), np.uint8) for r in records])
    return float(_NUCLEOTIDES[letters].mean()) if len(letters) else 0.0


class PhylogenyApp(FileItemsApp):
    name = "phylogeny"

    def __init__(self, urls: list[str], k: int = 5):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or \
                not K_RANGE[0] <= k <= K_RANGE[1]:
            raise ValueError(f"k must be an integer from {K_RANGE[0]} to {K_RANGE[1]} "
                             f"(the background needs (k-2)-words), got {k!r}")
        self.k = int(k)
        self._index_files(urls, "files", key_of=file_stem)

    def _proteins(self, key, raw):
        url = self._url[key]
        records = read_records(url, raw=raw)
        if _nucleotide_fraction(records) >= NUCLEOTIDE_FRACTION:
            raise InputError(url, "looks like DNA, not protein: give the predicted proteins "
                             "(e.g. pyrodigal, as pairflow data install does), not the genome",
                             record=records[0].name, index=0)
        return records

    def check(self, key, raw):
        records = self._proteins(key, raw)
        residues = encode_proteins([r.sequence for r in records])
        breaks = np.flatnonzero(residues < 0)  # encode_proteins ends every protein with one
        longest = int(np.max(np.diff(np.concatenate([[-1], breaks])) - 1)) if len(breaks) else 0
        if longest < self.k:
            raise InputError(self._url[key], f"no {self.k}-word of the 20 standard amino acids "
                             f"(every protein is shorter than k or broken by other letters)",
                             record=records[0].name, index=0)

    def parse(self, key, raw):
        records = self._proteins(key, raw)
        vec = composition_vector(np, encode_proteins([r.sequence for r in records]), self.k)
        if vec.norm2 <= 0:
            self.check(key, raw)
            raise InputError(self._url[key], "the composition vector is zero (every word occurs "
                             "exactly as often as its background predicts)")
        return _item(vec)

    def item_codec(self):
        """The L4 store keeps a CPU run's preprocessed items: ``CompositionVector``s."""
        from pairflow.engine import ItemCodec
        return ItemCodec(types=(CompositionVector,))

    def warmup(self, device):
        """One vector and one distance, so that the process's first tile does not load the
        numba kernels (numba's import and cached code, a fixed cost of CPU per process)."""
        left, right = (self.preprocess("warmup", _item(composition_vector(
            np, encode_proteins([protein]), self.k)), device) for protein in _WARMUP_PROTEINS)
        self.compare([left], [right], np.ones((1, 1), bool), device)

    def preprocess(self, key, item, device):
        arrays = (item["words"], item["values"], item["k1"])
        # (the numpy kernel's; an item stored before they were: None)
        order, suffixes = item.get("suffix_order"), item.get("suffixes")
        if device not in ("cpu", "host"):
            from pairflow.kernels.backend import namespace_for, to_device
            xp = namespace_for(device)
            # (numpy vectors keep codes as int32; the other backends' kernels take int64)
            arrays = tuple(to_device(xp, a.astype(np.int64) if a.dtype.kind == "i" else a,
                                     device) for a in arrays)
            order = suffixes = None
        return CompositionVector(self.k, *arrays, float(item["norm2"]), int(item["support"]),
                                 order, suffixes)

    def compare(self, left, right, mask, device):
        from pairflow.kernels.backend import namespace_for
        xp = namespace_for("cpu" if device == "host" else device)
        return {"distance": cv_distance_matrix(xp, left, right, mask)}

    def fields(self):
        return {"distance": "float64"}

    def describe(self):
        return {"app": self.name, "k": self.k, "n_inputs": len(self.urls)}

    def fingerprint(self):
        from pairflow.engine import url_digest
        return {"app": self.name, "k": self.k,
                "inputs": {u: url_digest(u) for u in self.urls}}


def _item(vec: CompositionVector) -> dict:
    """A parsed item: the vector's arrays and numbers, as the host tier stores them."""
    return {"words": vec.words, "values": vec.values, "k1": vec.k1,
            "norm2": vec.norm2, "support": vec.support, "suffix_order": vec.suffix_order,
            "suffixes": vec.suffixes}


def nj_newick(distances: np.ndarray, names: list[str]) -> str:
    """The neighbour-joining tree (scikit-bio) of a distance matrix, as Newick."""
    from skbio import DistanceMatrix
    from skbio.tree import nj
    tree = nj(DistanceMatrix(np.asarray(distances, dtype=float), [str(n) for n in names]))
    return str(tree).strip() + "\n"


def write_tree(result) -> str:
    """``result/tree.nwk`` of a finished run, from its dense distance matrix."""
    import zarr
    group = zarr.open_group(result.outputs["dense"], mode="r")
    newick = nj_newick(group["distance"][...], list(group.attrs["row_keys"]))
    path = os.path.join(os.path.dirname(result.outputs["dense"]), "tree.nwk")
    with open(path + ".tmp", "w") as fh:
        fh.write(newick)
    os.replace(path + ".tmp", path)
    result.outputs["tree"] = path
    return path


def _sink():
    from pairflow.engine import DenseMatrix
    return DenseMatrix(fields=["distance"], diagonal={"distance": 0.0})


def _import_tree_builder() -> None:
    """scikit-bio (with pandas, scipy, h5py: ~3 CPU-s) imported on a thread while the run
    computes, not after it, when the tree is built."""
    from pairflow.engine import import_in_background
    import_in_background("skbio.tree")


def phylogeny(urls, k: int = 5, **options):
    """The Python form of ``pairflow app=phylogeny``: run, then write the tree. ``options``
    are ``pairflow.allpairs`` options; the result's ``outputs["tree"]`` is the Newick file."""
    from pairflow.engine import allpairs
    _import_tree_builder()
    result = allpairs(app=PhylogenyApp(list(urls), k=k), sinks=[_sink()], wait=True, **options)
    write_tree(result)
    return result


def build(cfg):
    """The app and its sink from the Hydra config (``app=phylogeny``)."""
    from pairflow.apps.data import expand_inputs
    if cfg.sink.get("type", "dense") != "dense":
        raise ValueError(f"app=phylogeny needs the dense sink, not sink={cfg.sink.type}: the "
                         "tree is built from every distance")
    _import_tree_builder()
    return PhylogenyApp(expand_inputs(cfg.data.inputs), k=cfg.data.k), [_sink()]


def after(app, result, cfg) -> None:
    write_tree(result)


def report(result) -> str:
    s = result.summary
    return "\n".join([
        f"app=phylogeny n={s['n_items']} proteomes k={s['app_info']['k']} "
        f"pairs={s['pairs_total']} tiles={s['tiles_total']}",
        f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s), "
        f"R = {s['R']:.3f} loads/item",
        *(f"{name}: {path}" for name, path in result.outputs.items())])
