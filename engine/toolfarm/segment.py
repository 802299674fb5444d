"""Database segmentation (mpiBLAST's idea): a shared FASTA database cut into volumes that are
searched separately, and each unit's hits from every volume merged into the order one search of
the whole database prints them.

E-values depend on the database size, so every volume's search is told the whole database's
size (``{db_letters}`` / ``{db_records}`` in ``volume_args``: ``-dbsize`` for BLAST, ``-Z`` for
hmmsearch); the merge then only has to order and trim hits.
"""
from __future__ import annotations

from ..run.registry import Registry
from .units import scan_records


def fasta_stats(path: str) -> tuple[list[int], list[int]]:
    """Record offsets (then the size) and each record's residue count."""
    offsets = scan_records(path, "fasta")
    letters = []
    with open(path, "rb") as fh:
        for a, b in zip(offsets, offsets[1:]):
            fh.seek(a)
            body = fh.read(b - a).split(b"\n", 1)
            seq = body[1] if len(body) > 1 else b""
            letters.append(len(seq) - sum(seq.count(c) for c in (b"\n", b"\r", b" ", b"\t")))
    return offsets, letters


def plan_volumes(offsets: list[int], letters: list[int], volumes: int) -> list[tuple[int, int]]:
    """Byte ranges of ``volumes`` contiguous volumes with about equal letters each (database
    order kept: ties between volumes then merge in database order, as one search lists them)."""
    n = len(letters)
    volumes = max(1, min(volumes, n))
    total = sum(letters)
    cuts, acc, k = [0], 0, 1
    for i, size in enumerate(letters):
        acc += size
        if k < volumes and acc >= total * k / volumes and i + 1 < n and \
                n - (i + 1) >= volumes - k:
            cuts.append(i + 1)
            k += 1
    while len(cuts) < volumes:  # tiny databases: one record per remaining volume
        cuts.append(cuts[-1] + 1)
    cuts.append(n)
    return [(offsets[a], offsets[b]) for a, b in zip(cuts, cuts[1:])]


def merge_blast6(outputs: list[bytes], queries: list[str], max_targets: int = 500) -> bytes:
    """BLAST tabular (``-outfmt 6``) hits of one unit from every volume, as one search prints
    them: queries in input order; per query, subjects by best E-value, then best bit score,
    then volume (= database) order, each subject's HSPs in the order BLAST gave them; at most
    ``max_targets`` subjects per query (BLAST's ``-max_target_seqs``)."""
    order = {q: i for i, q in enumerate(queries)}
    hits: dict[str, dict[tuple, list]] = {}
    for vol, out in enumerate(outputs):
        for line in out.splitlines(keepends=True):
            if not line.strip() or line.startswith(b"#"):
                continue
            cols = line.split(b"\t")
            q, s = cols[0].decode(), cols[1].decode()
            subj = hits.setdefault(q, {}).setdefault((vol, s), [])
            subj.append((float(cols[10]), float(cols[11]), line))
    out = []
    for q in sorted(hits, key=lambda q: (order.get(q, len(order)), q)):
        subjects = sorted(hits[q].items(),
                          key=lambda kv: (min(h[0] for h in kv[1]), -max(h[1] for h in kv[1]),
                                          kv[0][0]))
        for _, hsps in subjects[:max_targets]:
            out.extend(h[2] for h in hsps)
    return b"".join(out)


def merge_concat(outputs: list[bytes], queries: list[str]) -> bytes:
    return b"".join(outputs)


MERGES = Registry("merge rule", {"blast6": lambda: merge_blast6, "concat": lambda: merge_concat})


def merge(rule: str | None, outputs: list[bytes], queries: list[str]) -> bytes:
    """One unit's outputs of one stream from every volume, merged by ``rule``."""
    if len(outputs) == 1:
        return outputs[0]
    return MERGES.make(rule or "concat")(outputs, queries)
