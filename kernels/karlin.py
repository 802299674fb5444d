"""Karlin-Altschul statistics for local alignment scores: bit scores and E-values as BLAST gives
them, for the protein matrices and gap costs BLAST has tables for.

Why tables: for gapped alignments lambda and K have no closed form; BLAST ships values estimated
by simulation (Altschul, Bundschuh, Olsen & Hwa, NAR 29:351, 2001) for each matrix and gap pair
it supports, and refuses other pairs. The numbers below are NCBI BLAST's own, transcribed from
``blast_stat.c`` (NCBI C++ Toolkit, public domain), one row per (gap existence, extension) in
BLAST's convention: a gap of length L costs ``existence + L * extension``. Columns: lambda, K, H,
alpha, beta (the mean length-correction, ``avg(L) = alpha * score + beta``), and Spouge's
finite-size-correction parameters C, alpha_v (variance) and sigma (covariance). Row ``None`` is
the ungapped case, which Spouge's correction also reads.

Bit score (every BLAST program): ``S' = (lambda * S - ln K) / ln 2``.

Two E-values:

* :func:`evalues_spouge` is what ``blastp`` (BLAST+ 2.2.28 and later) reports: Spouge's
  finite-size correction, computed per pair from the query length m, the subject length n and
  the database length D, scaled from the pair to the database by ``D / n``. Given the same raw
  score it reproduces blastp 2.12's printed E-values (tests/unit/test_karlin.py checks it against
  blastp output and hand-computed cases).
* :func:`evalues_karlin` is the classic ``E = K * m' * n' * exp(-lambda * S)`` over the search
  space ``m' * n'`` with BLAST's length adjustment ``l`` (:func:`length_adjustment`, the same
  fixed-point iteration as BLAST): ``m' = m - l``, ``n' = D - N * l`` for a database of N
  sequences. It is what BLAST reported before the correction (and still does where no Spouge
  parameters exist).

Everything here is a pure function of numbers; nothing knows about files or runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["KarlinParams", "lookup", "for_scoring", "supported", "bit_scores",
           "length_adjustment", "evalues_karlin", "evalues_spouge", "EVALUE_METHODS"]

EVALUE_METHODS = ("spouge", "karlin")

# (existence, extension): (lambda, K, H, alpha, beta, C, alpha_v, sigma); None = ungapped.
_TABLES: dict[str, dict] = {
    "blosum45": {
        None: (0.2291, 0.0924, 0.2514, 0.9113, -5.7, 0.641318, 9.611060, 9.611060),
        (13, 3): (0.207, 0.049, 0.14, 1.5, -22, 0.671128, 35.855900, 35.963900),
        (12, 3): (0.199, 0.039, 0.11, 1.8, -34, 0.691530, 45.693600, 45.851700),
        (11, 3): (0.190, 0.031, 0.095, 2.0, -38, 0.691181, 62.874100, 63.103700),
        (10, 3): (0.179, 0.023, 0.075, 2.4, -51, 0.710529, 88.286800, 88.639100),
        (16, 2): (0.210, 0.051, 0.14, 1.5, -24, 0.666680, 36.279800, 36.452400),
        (15, 2): (0.203, 0.041, 0.12, 1.7, -31, 0.673871, 44.825700, 45.060400),
        (14, 2): (0.195, 0.032, 0.10, 1.9, -36, 0.685753, 60.736200, 61.102300),
        (13, 2): (0.185, 0.024, 0.084, 2.2, -45, 0.698480, 85.148100, 85.689400),
        (12, 2): (0.171, 0.016, 0.061, 2.8, -65, 0.713429, 127.758000, 128.582000),
        (19, 1): (0.205, 0.040, 0.11, 1.9, -43, 0.672302, 53.071400, 53.828200),
        (18, 1): (0.198, 0.032, 0.10, 2.0, -43, 0.682580, 72.342400, 73.403900),
        (17, 1): (0.189, 0.024, 0.079, 2.4, -57, 0.695035, 103.055000, 104.721000),
        (16, 1): (0.176, 0.016, 0.063, 2.8, -67, 0.712966, 170.100000, 173.003000),
    },
    "blosum50": {
        None: (0.2318, 0.112, 0.3362, 0.6895, -4.0, 0.609639, 5.388310, 5.388310),
        (13, 3): (0.212, 0.063, 0.19, 1.1, -16, 0.639287, 18.113800, 18.202800),
        (12, 3): (0.206, 0.055, 0.17, 1.2, -18, 0.644715, 22.654600, 22.777700),
        (11, 3): (0.197, 0.042, 0.14, 1.4, -25, 0.656327, 29.861100, 30.045700),
        (10, 3): (0.186, 0.031, 0.11, 1.7, -34, 0.671150, 42.393800, 42.674000),
        (9, 3): (0.172, 0.022, 0.082, 2.1, -48, 0.694326, 66.069600, 66.516400),
        (16, 2): (0.215, 0.066, 0.20, 1.05, -15, 0.633899, 17.951800, 18.092100),
        (15, 2): (0.210, 0.058, 0.17, 1.2, -20, 0.641985, 21.940100, 22.141800),
        (14, 2): (0.202, 0.045, 0.14, 1.4, -27, 0.650682, 28.681200, 28.961900),
        (13, 2): (0.193, 0.035, 0.12, 1.6, -32, 0.660984, 42.059500, 42.471600),
        (12, 2): (0.181, 0.025, 0.095, 1.9, -41, 0.678090, 63.747600, 64.397300),
        (19, 1): (0.212, 0.057, 0.18, 1.2, -21, 0.635714, 26.311200, 26.923300),
        (18, 1): (0.207, 0.050, 0.15, 1.4, -28, 0.643523, 34.903700, 35.734800),
        (17, 1): (0.198, 0.037, 0.12, 1.6, -33, 0.654504, 48.895800, 50.148600),
        (16, 1): (0.186, 0.025, 0.10, 1.9, -42, 0.667750, 76.469100, 78.443000),
        (15, 1): (0.171, 0.015, 0.063, 2.7, -76, 0.694575, 140.053000, 144.160000),
    },
    "blosum62": {
        None: (0.3176, 0.134, 0.4012, 0.7916, -3.2, 0.623757, 4.964660, 4.964660),
        (11, 2): (0.297, 0.082, 0.27, 1.1, -10, 0.641766, 12.673800, 12.757600),
        (10, 2): (0.291, 0.075, 0.23, 1.3, -15, 0.649362, 16.474000, 16.602600),
        (9, 2): (0.279, 0.058, 0.19, 1.5, -19, 0.659245, 22.751900, 22.950000),
        (8, 2): (0.264, 0.045, 0.15, 1.8, -26, 0.672692, 35.483800, 35.821300),
        (7, 2): (0.239, 0.027, 0.10, 2.5, -46, 0.702056, 61.238300, 61.886000),
        (6, 2): (0.201, 0.012, 0.061, 3.3, -58, 0.740802, 140.417000, 141.882000),
        (13, 1): (0.292, 0.071, 0.23, 1.2, -11, 0.647715, 19.506300, 19.893100),
        (12, 1): (0.283, 0.059, 0.19, 1.5, -19, 0.656391, 27.856200, 28.469900),
        (11, 1): (0.267, 0.041, 0.14, 1.9, -30, 0.669720, 42.602800, 43.636200),
        (10, 1): (0.243, 0.024, 0.10, 2.5, -44, 0.693267, 83.178700, 85.065600),
        (9, 1): (0.206, 0.010, 0.052, 4.0, -87, 0.731887, 210.333000, 214.842000),
    },
    "blosum80": {
        None: (0.3430, 0.177, 0.6568, 0.5222, -1.6, 0.564057, 1.918130, 1.918130),
        (25, 2): (0.342, 0.17, 0.66, 0.52, -1.6, 0.563956, 1.731000, 1.731300),
        (13, 2): (0.336, 0.15, 0.57, 0.59, -3, 0.570979, 2.673470, 2.692300),
        (9, 2): (0.319, 0.11, 0.42, 0.76, -6, 0.587837, 5.576090, 5.667860),
        (8, 2): (0.308, 0.090, 0.35, 0.89, -9, 0.597556, 7.536950, 7.686230),
        (7, 2): (0.293, 0.070, 0.27, 1.1, -14, 0.615254, 11.586600, 11.840400),
        (6, 2): (0.268, 0.045, 0.19, 1.4, -19, 0.644054, 19.958100, 20.441200),
        (11, 1): (0.314, 0.095, 0.35, 0.90, -9, 0.590702, 8.808610, 9.223320),
        (10, 1): (0.299, 0.071, 0.27, 1.1, -14, 0.609620, 13.833800, 14.533400),
        (9, 1): (0.279, 0.048, 0.20, 1.4, -19, 0.623800, 24.252000, 25.490400),
    },
    "blosum90": {
        None: (0.3346, 0.190, 0.7547, 0.4434, -1.4, 0.544178, 1.377760, 1.377760),
        (9, 2): (0.310, 0.12, 0.46, 0.67, -6, 0.570267, 4.232290, 4.334170),
        (8, 2): (0.300, 0.099, 0.39, 0.76, -7, 0.581580, 5.797020, 5.961420),
        (7, 2): (0.283, 0.072, 0.30, 0.93, -11, 0.600024, 9.040880, 9.321600),
        (6, 2): (0.259, 0.048, 0.22, 1.2, -16, 0.629344, 16.024400, 16.531600),
        (11, 1): (0.302, 0.093, 0.39, 0.78, -8, 0.576919, 7.143250, 7.619190),
        (10, 1): (0.290, 0.075, 0.28, 1.04, -15, 0.591366, 11.483900, 12.269800),
        (9, 1): (0.265, 0.044, 0.20, 1.3, -19, 0.613013, 21.408300, 22.840900),
    },
    "pam30": {
        None: (0.3400, 0.283, 1.754, 0.1938, -0.3, 0.436164, 0.161818, 0.161818),
        (7, 2): (0.305, 0.15, 0.87, 0.35, -3, 0.479087, 1.014010, 1.162730),
        (6, 2): (0.287, 0.11, 0.68, 0.42, -4, 0.499980, 1.688060, 1.951430),
        (5, 2): (0.264, 0.079, 0.45, 0.59, -7, 0.533009, 3.377010, 3.871950),
        (10, 1): (0.309, 0.15, 0.88, 0.35, -3, 0.474741, 1.372050, 1.788770),
        (9, 1): (0.294, 0.11, 0.61, 0.48, -6, 0.492716, 2.463920, 3.186150),
        (8, 1): (0.270, 0.072, 0.40, 0.68, -10, 0.521286, 5.368130, 6.763480),
    },
    "pam70": {
        None: (0.3345, 0.229, 1.029, 0.3250, -0.7, 0.511296, 0.633439, 0.633439),
        (8, 2): (0.301, 0.12, 0.54, 0.56, -5, 0.549019, 2.881650, 3.025710),
        (7, 2): (0.286, 0.093, 0.43, 0.67, -7, 0.565659, 4.534540, 4.785780),
        (6, 2): (0.264, 0.064, 0.29, 0.90, -12, 0.596330, 7.942630, 8.402720),
        (11, 1): (0.305, 0.12, 0.52, 0.59, -6, 0.543514, 3.681400, 4.108020),
        (10, 1): (0.291, 0.091, 0.41, 0.71, -9, 0.560723, 6.002970, 6.716570),
        (9, 1): (0.270, 0.060, 0.28, 0.97, -14, 0.585186, 11.360800, 12.636700),
    },
    "pam250": {
        None: (0.2252, 0.0868, 0.2223, 0.98, -5.0, 0.660059, 11.754300, 11.754300),
        (15, 3): (0.205, 0.049, 0.13, 1.6, -23, 0.687656, 34.578400, 34.928000),
        (14, 3): (0.200, 0.043, 0.12, 1.7, -26, 0.689768, 43.353000, 43.443800),
        (13, 3): (0.194, 0.036, 0.10, 1.9, -31, 0.697431, 50.948500, 51.081700),
        (12, 3): (0.186, 0.029, 0.085, 2.2, -41, 0.704565, 69.606500, 69.793600),
        (11, 3): (0.174, 0.020, 0.070, 2.5, -48, 0.722438, 98.653500, 98.927100),
        (17, 2): (0.204, 0.047, 0.12, 1.7, -28, 0.684799, 41.583800, 41.735800),
        (16, 2): (0.198, 0.038, 0.11, 1.8, -29, 0.691098, 51.635200, 51.843900),
        (15, 2): (0.191, 0.031, 0.087, 2.2, -44, 0.699051, 67.256700, 67.558500),
        (14, 2): (0.182, 0.024, 0.073, 2.5, -53, 0.714103, 96.315100, 96.756800),
        (13, 2): (0.171, 0.017, 0.059, 2.9, -64, 0.728738, 135.653000, 136.339000),
        (21, 1): (0.205, 0.045, 0.11, 1.8, -34, 0.683265, 48.728200, 49.218800),
        (20, 1): (0.199, 0.037, 0.10, 1.9, -35, 0.689380, 60.832000, 61.514100),
        (19, 1): (0.192, 0.029, 0.083, 2.3, -52, 0.696344, 84.019700, 84.985600),
        (18, 1): (0.183, 0.021, 0.070, 2.6, -60, 0.710525, 113.829000, 115.184000),
        (17, 1): (0.171, 0.014, 0.052, 3.3, -86, 0.727000, 175.071000, 177.196000),
    },
}


@dataclass(frozen=True)
class KarlinParams:
    """One row of BLAST's table, with the ungapped row's alpha and alpha_v that Spouge's
    correction needs. ``gap_open`` and ``gap_extend`` are in BLAST's convention."""

    matrix: str
    gap_open: int
    gap_extend: int
    lam: float
    K: float
    H: float
    alpha: float
    beta: float
    C: float
    alpha_v: float
    sigma: float
    alpha_ungapped: float
    alpha_v_ungapped: float

    @property
    def logK(self) -> float:
        return math.log(self.K)

    def describe(self) -> dict:
        return {"matrix": self.matrix, "blast_gap_open": self.gap_open,
                "blast_gap_extend": self.gap_extend, "lambda": self.lam, "K": self.K,
                "H": self.H, "alpha": self.alpha, "beta": self.beta}


def supported() -> dict[str, list[tuple[int, int]]]:
    """Every matrix and (existence, extension) pair with parameters, BLAST's convention."""
    return {m: [g for g in rows if g is not None] for m, rows in _TABLES.items()}


def lookup(matrix: str, gap_open: int, gap_extend: int) -> KarlinParams:
    """Parameters for ``matrix`` with BLAST-convention gap costs (existence, extension).

    A pair BLAST has no row for is refused, as BLAST refuses it: there is no formula to fall
    back on for gapped scores."""
    name = str(matrix).strip().lower()
    rows = _TABLES.get(name)
    if rows is None:
        raise ValueError(f"no Karlin-Altschul parameters for matrix {matrix!r}: BLAST's tables "
                         f"cover {', '.join(sorted(_TABLES))}")
    key = (int(gap_open), int(gap_extend))
    if key not in rows:
        pairs = ", ".join(f"{o}/{e}" for o, e in supported()[name])
        raise ValueError(f"no Karlin-Altschul parameters for {name} with BLAST gap costs "
                         f"{key[0]}/{key[1]} (a gap of length L costs {key[0]} + L*{key[1]}); "
                         f"BLAST's table has {pairs}")
    lam, K, H, alpha, beta, C, alpha_v, sigma = rows[key]
    un = rows[None]
    return KarlinParams(name, key[0], key[1], lam, K, H, alpha, beta, C, alpha_v, sigma,
                        un[3], un[6])


def for_scoring(scoring) -> KarlinParams:
    """Parameters for a :class:`kernels.scoring.Scoring`: its gap of length 1 costs
    ``scoring.open``, which is BLAST's existence + extension."""
    return lookup(scoring.matrix, scoring.open - scoring.extend, scoring.extend)


# ------------------------------------------------------------------------------- formulas

def bit_scores(scores, p: KarlinParams) -> np.ndarray:
    """``(lambda * S - ln K) / ln 2`` for raw scores ``S``."""
    s = np.asarray(scores, dtype=np.float64)
    return (p.lam * s - p.logK) / math.log(2.0)


def length_adjustment(p: KarlinParams, query_length: int, db_length: int,
                      db_num_seqs: int) -> int:
    """BLAST's length adjustment ``l``: the largest integer below the fixed point of
    ``f(l) = beta + (alpha / lambda) * (ln K + ln((m - l) * (n - N l)))``, kept small enough
    that ``K (m - l)(n - N l) > max(m, n)``; found by the same bounded iteration (at most 20
    steps) BLAST uses, so that an unconverged case gives BLAST's answer too."""
    m, n, N = float(query_length), float(db_length), float(db_num_seqs)
    adl, beta, logK = p.alpha / p.lam, p.beta, p.logK
    a, mb, c = N, m * N + n, n * m - max(m, n) / p.K
    if c < 0:
        return 0
    ell_max = 2 * c / (mb + math.sqrt(mb * mb - 4 * a * c))
    ell_min, ell_next, converged = 0.0, 0.0, False
    for i in range(1, 21):
        ell = ell_next
        bar = adl * (logK + math.log((m - ell) * (n - N * ell))) + beta
        if bar >= ell:
            ell_min = ell
            if bar - ell_min <= 1.0:
                converged = True
                break
            if ell_min == ell_max:
                break
        else:
            ell_max = ell
        if ell_min <= bar <= ell_max:
            ell_next = bar
        else:
            ell_next = ell_max if i == 1 else (ell_min + ell_max) / 2
    out = int(ell_min)
    if converged:
        up = math.ceil(ell_min)
        if up <= ell_max and adl * (logK + math.log((m - up) * (n - N * up))) + beta >= up:
            out = int(up)
    return out


def evalues_karlin(scores, query_lengths, db_length: int, db_num_seqs: int,
                   p: KarlinParams) -> np.ndarray:
    """Classic E-values ``K m' n' exp(-lambda S)`` with BLAST's length adjustment per query."""
    s = np.asarray(scores, dtype=np.float64)
    m = np.broadcast_to(np.asarray(query_lengths, dtype=np.int64), s.shape)
    space = np.empty(s.shape, dtype=np.float64)
    cache: dict[int, float] = {}
    for idx, mi in np.ndenumerate(m):
        if mi not in cache:
            ell = length_adjustment(p, int(mi), db_length, db_num_seqs)
            cache[mi] = max(float(mi - ell), 1.0) * max(float(db_length - db_num_seqs * ell),
                                                        1.0)
        space[idx] = cache[mi]
    return p.K * space * np.exp(-p.lam * s)


def evalues_spouge(scores, query_lengths, subject_lengths, db_length: int,
                   p: KarlinParams) -> np.ndarray:
    """E-values with Spouge's finite-size correction, as blastp reports them.

    For a pair of lengths (m, n) and score y the expected number of alignments scoring >= y is
    ``K exp(-lambda y) * (p_m p_n + c_y P_m P_n)``, where ``p_m = l_m P_m + s_m phi(l_m / s_m)``,
    ``l_m = m - (a y + b)`` the length left after the alignment's mean extent, ``s_m^2`` its
    variance ``max(2 alpha_v / lambda, alpha_v y + beta_v)``, ``P_m = Phi(l_m / s_m)`` (normal
    CDF), and likewise for n; ``c_y = max(2 sigma / lambda, sigma y + tau)``. The intercepts come
    from the ungapped row: ``b = 2 G (a_un - a)``, ``beta_v = 2 G (alpha_v_un - alpha_v)``,
    ``tau = 2 G (alpha_v_un - sigma)``, ``G`` = existence + extension. The pair's E-value is
    scaled to the database by ``D / n``.
    """
    from scipy.special import ndtr
    y = np.asarray(scores, dtype=np.float64)
    m = np.asarray(query_lengths, dtype=np.float64)
    n = np.asarray(subject_lengths, dtype=np.float64)
    G = p.gap_open + p.gap_extend
    a, alpha_v, sigma, lam = p.alpha, p.alpha_v, p.sigma, p.lam
    b = 2.0 * G * (p.alpha_ungapped - a)
    beta_v = 2.0 * G * (p.alpha_v_ungapped - alpha_v)
    tau = 2.0 * G * (p.alpha_v_ungapped - sigma)
    mean = a * y + b
    sd = np.sqrt(np.maximum(2.0 * alpha_v / lam, alpha_v * y + beta_v))
    inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)

    def side(length):
        left = length - mean
        z = left / sd
        cdf = ndtr(z)
        return left * cdf + sd * inv_sqrt_2pi * np.exp(-0.5 * z * z), cdf

    pm, Pm = side(m)
    pn, Pn = side(n)
    c = np.maximum(2.0 * sigma / lam, sigma * y + tau)
    area = pm * pn + c * Pm * Pn
    return area * p.K * np.exp(-lam * y) * (float(db_length) / n)
