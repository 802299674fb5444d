"""The ``TopK`` sink's compiled passes (numba, compiled on first use): each row's and
column's k best cells of a full tile (``topk_cells``), and each query's k best among a
run's candidates (``topk_merge_runs``, on runs ordered by query, or on all of them grouped
by ``query_order``), all ties to the lower index; and the finalize's bounded state, each
query's k best so far, into which the parts are merged one at a time (``topk_state_merge``,
``topk_state_rows``). Pure functions of arrays; ``parts.TopK`` calls them through ``compiled``.
"""
from __future__ import annotations

import numpy as np


def topk_cells(values, mask, use_mask, k, sign, do_cols):
    """Each row's k best cells of a tile (and each column's, ``do_cols``), by value (times
    ``sign``: -1 ranks the smallest first) then by lower index, in one pass: (i, j, is_column)
    of every candidate. Most cells cost a comparison with the row's and the column's k-th best
    so far; compiled with numba on first use (``compiled``). The last value returned is
    False, and nothing else, when a value is NaN."""
    nr, nc = values.shape
    rv = np.empty((nr, k))
    rj = np.empty((nr, k), np.int64)
    rn = np.zeros(nr, np.int64)
    cv = np.empty((nc, k))
    ci = np.empty((nc, k), np.int64)
    cn = np.zeros(nc, np.int64)
    cmin = np.full(nc, -np.inf)  # a column's k-th best once it holds k cells
    for i in range(nr):
        rmin = -np.inf
        for j in range(nc):
            if use_mask and not mask[i, j]:
                continue
            v = values[i, j] * sign
            if v != v:  # NaN: the caller falls back to the sort, which ranks NaN last
                return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.bool_), False
            n = rn[i]
            if n < k or v > rmin:  # later equal cells lose: their index is higher
                p = n if n < k else k - 1
                while p > 0 and rv[i, p - 1] < v:
                    if p < k:
                        rv[i, p] = rv[i, p - 1]
                        rj[i, p] = rj[i, p - 1]
                    p -= 1
                rv[i, p] = v
                rj[i, p] = j
                if n < k:
                    rn[i] = n + 1
                if rn[i] == k:
                    rmin = rv[i, k - 1]
            if do_cols:
                m = cn[j]
                if m < k or v > cmin[j]:
                    p = m if m < k else k - 1
                    while p > 0 and cv[j, p - 1] < v:
                        if p < k:
                            cv[j, p] = cv[j, p - 1]
                            ci[j, p] = ci[j, p - 1]
                        p -= 1
                    cv[j, p] = v
                    ci[j, p] = i
                    if m < k:
                        cn[j] = m + 1
                    if cn[j] == k:
                        cmin[j] = cv[j, k - 1]
    total = rn.sum() + (cn.sum() if do_cols else 0)
    out_i = np.empty(total, np.int64)
    out_j = np.empty(total, np.int64)
    out_c = np.zeros(total, np.bool_)
    w = 0
    for i in range(nr):
        for p in range(rn[i]):
            out_i[w] = i
            out_j[w] = rj[i, p]
            w += 1
    if do_cols:
        for j in range(nc):
            for p in range(cn[j]):
                out_i[w] = ci[j, p]
                out_j[w] = j
                out_c[w] = True
                w += 1
    return out_i, out_j, out_c, True


def query_order(q):
    """The permutation that groups candidates by query (0 <= query), each query's in input
    order: a counting sort, linear, where a sort of a million candidates at the end of a run
    of reads was most of its finalize."""
    n = q.shape[0]
    nq = 0
    for x in range(n):
        if q[x] + 1 > nq:
            nq = q[x] + 1
    pos = np.zeros(nq + 1, np.int64)
    for x in range(n):
        pos[q[x] + 1] += 1
    for g in range(nq):
        pos[g + 1] += pos[g]
    order = np.empty(n, np.int64)
    for x in range(n):
        order[pos[q[x]]] = x
        pos[q[x]] += 1
    return order


def topk_merge_runs(q, t, v, starts, k, sign):
    """The k best (value times ``sign``, then lower target) of each query among candidates
    that come in runs (``starts[r]`` to ``starts[r + 1]``), each ordered by query, as a tile's
    rows then its columns, or the TopK sink's parts, do: (query, target, index into ``v``,
    rank) ordered by query then rank, what a lexsort by (query, -value, target) cut at k
    gives, ties included (a query's candidates are taken in input order). Each run is read
    front to back. Unordered candidates are one run once ``query_order`` has grouped them.
    The last value returned is False, and nothing else, when a run is not ordered by query
    (or a query is negative)."""
    n = q.shape[0]
    runs = starts.shape[0] - 1
    nq = 0
    for r in range(runs):
        for x in range(starts[r], starts[r + 1]):
            if x > starts[r] and q[x] < q[x - 1] or q[x] < 0:
                e = np.empty(0, np.int64)
                return e, e, e, e, False
            if q[x] + 1 > nq:
                nq = q[x] + 1
    cur = starts[:runs].copy()
    cap = min(n, nq * k)
    oq = np.empty(cap, np.int64)
    ot = np.empty(cap, np.int64)
    ox = np.empty(cap, np.int64)
    orank = np.empty(cap, np.int64)
    bs = np.empty(k)
    bt = np.empty(k, np.int64)
    bx = np.empty(k, np.int64)
    w = 0
    for g in range(nq):
        m = 0
        for r in range(runs):
            x = cur[r]
            end = starts[r + 1]
            while x < end and q[x] == g:
                sv = v[x] * sign
                tx = t[x]
                if m < k or sv > bs[k - 1] or (sv == bs[k - 1] and tx < bt[k - 1]):
                    p = m if m < k else k - 1
                    while p > 0 and (sv > bs[p - 1] or (sv == bs[p - 1] and tx < bt[p - 1])):
                        bs[p] = bs[p - 1]
                        bt[p] = bt[p - 1]
                        bx[p] = bx[p - 1]
                        p -= 1
                    bs[p] = sv
                    bt[p] = tx
                    bx[p] = x
                    if m < k:
                        m += 1
                x += 1
            cur[r] = x
        for p in range(m):
            oq[w] = g
            ot[w] = bt[p]
            ox[w] = bx[p]
            orank[w] = p + 1
            w += 1
    return oq[:w], ot[:w], ox[:w], orank[:w], True


def topk_state_merge(bv, bt, bn, q, t, v, sign):
    """Candidates (q, t, v) merged into each query's k best so far: ``bv`` / ``bt`` (n, k) the
    values and targets of query q's ``bn[q]`` best, best first (value times ``sign``, then the
    lower target). The same k as ``topk_merge_runs`` on all candidates at once, whatever the
    order they come in (the order is total: a target is a query's candidate once), in memory
    bounded by n * k, not by the candidates of a run. Returns False, merging nothing, when a
    query is out of range or a value is NaN."""
    n, k = bv.shape
    for x in range(q.shape[0]):
        if q[x] < 0 or q[x] >= n or v[x] != v[x]:
            return False
    for x in range(q.shape[0]):
        g = q[x]
        sv = v[x] * sign
        tx = t[x]
        m = bn[g]
        if m == k:
            last = bv[g, k - 1] * sign
            if sv < last or (sv == last and tx > bt[g, k - 1]):
                continue
        p = m if m < k else k - 1
        while p > 0:
            pv = bv[g, p - 1] * sign
            if sv > pv or (sv == pv and tx < bt[g, p - 1]):
                if p < k:
                    bv[g, p] = bv[g, p - 1]
                    bt[g, p] = bt[g, p - 1]
                p -= 1
            else:
                break
        bv[g, p] = v[x]
        bt[g, p] = tx
        if m < k:
            bn[g] = m + 1
    return True


def topk_state_rows(bv, bt, bn):
    """The state of ``topk_state_merge`` as rows (query, target, value, rank), ordered by
    query then rank."""
    n, k = bv.shape
    total = 0
    for g in range(n):
        total += bn[g]
    oq = np.empty(total, np.int64)
    ot = np.empty(total, np.int64)
    ov = np.empty(total)
    orank = np.empty(total, np.int64)
    w = 0
    for g in range(n):
        for p in range(bn[g]):
            oq[w] = g
            ot[w] = bt[g, p]
            ov[w] = bv[g, p]
            orank[w] = p + 1
            w += 1
    return oq, ot, ov, orank


_BUILT: dict = {}


def compiled(py_func):
    """``py_func`` compiled on first use (numba is imported only by a TopK sink that writes)."""
    kernel = _BUILT.get(py_func)
    if kernel is None:
        import numba
        kernel = _BUILT[py_func] = numba.njit(cache=True, nogil=True)(py_func)
    return kernel
