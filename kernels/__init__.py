"""The compute kernels the apps run on a tile, pure of Ray and of the engine: k-mer sets and their
exact Jaccard (``kmers``, ``jaccard``, the bitset family, ``sketch``), Smith-Waterman and its
statistics (``smith_waterman``, ``parasail_loop``, ``opal``, ``scoring``, ``karlin``), camera noise
(``prnu``), point-cloud registration (``registration``), composition vectors (``composition``),
known CPU work for benchmarks (``spin``), and what they share: array namespaces (``backend``) and
numba compiled on first call (``lazyjit``).
"""
