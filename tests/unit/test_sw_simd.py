"""The AVX-512 Smith-Waterman kernel (``kernels/sw_simd.py``, ``kernels/_sw_simd.c``) against
Biopython's ``PairwiseAligner`` (the oracle: local scores with the same matrix and gaps), on drawn
schemes and sequences that cross its 64-lane batches, both saturation steps (8 and 16 bits) and
masks; and ``opal_scores``'s two paths (this kernel, Opal itself) against each other.

Whether this machine can run the kernel is read from /proc/cpuinfo, not from the code under test:
where the CPU has AVX-512 BW and VBMI the extension must be built and used (an install that
silently lost it would fall back to Opal, 1.7x slower, and pass every other test).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels import opal, sw_simd
from pairflow.kernels.scoring import Scoring


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


CPU_HAS_IT = {"avx512bw", "avx512vbmi"} <= _cpu_flags()
needs_cpu = pytest.mark.skipif(not CPU_HAS_IT, reason="this CPU lacks AVX-512 BW/VBMI")

AMINO = "ARNDCQEGHILKMFPSTWYVBZX*"


def _oracle(queries, targets, scoring) -> np.ndarray:
    bio = scoring.biopython_aligner()
    return np.array([[int(bio.score(q, t)) for t in targets] for q in queries], dtype=np.int64)


def test_kernel_is_there_exactly_where_the_cpu_runs_it():
    scoring = Scoring.create("blosum62", 11, 1)
    assert sw_simd.available(scoring) == CPU_HAS_IT
    assert opal.available(scoring) or not CPU_HAS_IT


@st.composite
def _case(draw):
    matrix = draw(st.sampled_from(["blosum62", "blosum45", "blosum80", "pam250", "pam30"]))
    convention = draw(st.sampled_from(["standard", "blast"]))
    ge = draw(st.integers(0, 5))
    go = draw(st.integers(ge if convention == "standard" else 0, 20))
    scoring = Scoring.create(matrix, go, ge, convention)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    letters = np.array(list(draw(st.sampled_from([AMINO, AMINO[:20], "WCHY", "AG"]))))

    def rand(n):
        return "".join(rng.choice(letters, size=n))

    base = rand(draw(st.integers(1, 90)))
    queries = [rand(draw(st.integers(1, 120))) for _ in range(draw(st.integers(1, 3)))]
    queries.append(base)
    n_targets = draw(st.integers(1, 140))  # one, two or three batches of 64 lanes
    targets = []
    for k in range(n_targets):
        if k % 7 == 0:  # relatives of a query: high scores, saturating lanes among others
            rel = list(base * draw(st.integers(1, 3)))
            for _ in range(int(rng.integers(0, 6))):
                pos = int(rng.integers(len(rel)))
                rel[pos] = str(rng.choice(letters))
            targets.append("".join(rel))
        else:
            targets.append(rand(int(rng.integers(1, 160))))
    return scoring, queries, targets


@needs_cpu
@settings(derandomize=True, max_examples=60, deadline=None)
@given(case=_case())
def test_scores_equal_biopython(case):
    scoring, queries, targets = case
    got = sw_simd.sw_simd_scores(queries, targets, scoring)
    assert got.dtype == np.int32 and got.shape == (len(queries), len(targets))
    np.testing.assert_array_equal(got, _oracle(queries, targets, scoring))


@needs_cpu
def test_both_saturation_steps():
    """8 bits saturate at 127 (redone in 16 bits), 16 bits at 32,767 (scored by parasail): an
    identical W run of n letters scores 11 n under BLOSUM62, beside random lanes in one batch."""
    scoring = Scoring.create("blosum62", 11, 1)
    rng = np.random.default_rng(5)
    rand = ["".join(rng.choice(list(AMINO[:20]), size=int(rng.integers(50, 300))))
            for _ in range(70)]
    queries = ["W" * 3100, "W" * 40 + rand[0], rand[1]]
    targets = rand[2:] + ["W" * 3100, "W" * 40, "W" * 11, "W" * 12]
    got = sw_simd.sw_simd_scores(queries, targets, scoring)
    np.testing.assert_array_equal(got[:, -4:], [[34100, 440, 121, 132], [440, 440, 121, 132],
                                                got[2, -4:]])
    assert got[0, -4] > 32767 and got[1, -3] > 127
    np.testing.assert_array_equal(got, _oracle(queries, targets, scoring))


@needs_cpu
def test_mask_zeroes_the_unwanted_pairs():
    scoring = Scoring.create("blosum62", 11, 1)
    rng = np.random.default_rng(9)
    qs = ["".join(rng.choice(list(AMINO[:20]), size=80)) for _ in range(3)]
    ts = ["".join(rng.choice(list(AMINO[:20]), size=int(n))) for n in rng.integers(20, 200, 70)]
    mask = rng.random((3, 70)) < 0.5
    got = sw_simd.sw_simd_scores(qs, ts, scoring, mask)
    want = _oracle(qs, ts, scoring)
    np.testing.assert_array_equal(got[mask], want[mask])
    assert not got[~mask].any()


def test_opal_itself_gives_the_same_scores():
    """The path a CPU without AVX-512 takes (Opal) against the oracle, and against this kernel
    where it runs."""
    pytest.importorskip("pyopal")
    scoring = Scoring.create("blosum62", 11, 1)
    rng = np.random.default_rng(11)
    qs = ["".join(rng.choice(list(AMINO[:20]), size=int(n))) for n in rng.integers(30, 200, 4)]
    ts = ["".join(rng.choice(list(AMINO[:20]), size=int(n))) for n in rng.integers(30, 300, 90)]
    ts[3] = qs[0]
    want = _oracle(qs, ts, scoring)
    np.testing.assert_array_equal(opal.pyopal_scores(qs, ts, scoring), want)
    np.testing.assert_array_equal(opal.opal_scores(qs, ts, scoring), want)
