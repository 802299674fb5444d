"""The numpy k-mer oracle (used where the string-set oracle would take minutes) gives exactly
the string-set oracle's sets and matrices, on real sequence with N runs, lower case and k edges."""
import numpy as np
import pytest

from tests.oracles import (LAMBDA, canonical_kmer_codes, canonical_kmers, jaccard_matrix,
                           jaccard_matrix_of_codes, read_sequences)

_CODE = {c: i for i, c in enumerate("ACGT")}


def _code(kmer: str) -> int:
    x = 0
    for c in kmer:
        x = 4 * x + _CODE[c]
    return x


@pytest.mark.parametrize("k", [1, 5, 21, 31])
def test_codes_are_the_string_sets(k):
    (_, seq), = read_sequences(LAMBDA)
    pieces = [seq[i:i + 3000] for i in range(0, 30000, 3000)]
    pieces[2] = pieces[2][:1000] + "NNNRY" + pieces[2][1000:].lower()
    pieces.append("ACG")  # shorter than most k: no k-mer
    for p in pieces:
        want = sorted(_code(m) for m in canonical_kmers([p], k))
        assert canonical_kmer_codes([p], k).tolist() == want
    sets = [canonical_kmers([p], k) for p in pieces[:6]]
    codes = [canonical_kmer_codes([p], k) for p in pieces[:6]]
    sim, inter = jaccard_matrix(sets)
    for method in ("masks", "sparse"):
        sim2, inter2 = jaccard_matrix_of_codes(codes, method)
        assert np.array_equal(inter, inter2) and np.array_equal(sim, sim2), method
