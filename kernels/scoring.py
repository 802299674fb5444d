"""Scoring schemes for local alignment: substitution matrix, affine gaps, and input checks.

Gap convention
--------------
``convention="standard"`` (the default) charges a gap of length L

    gap_open + (L - 1) * gap_extend

which is what parasail, EMBOSS water and Biopython's ``PairwiseAligner`` do.  The first gap
position pays ``gap_open`` alone.  ``convention="blast"`` charges

    gap_open + L * gap_extend

as BLAST does, so BLAST's "11/1" is standard "12/1".  Whatever the convention, the kernels only
ever see the standard form: :attr:`Scoring.open` and :attr:`Scoring.extend` are the numbers handed
to parasail and to the numpy reference, and the convention is applied once here, never per call.

Biopython mapping (verified by ``tests/unit/test_smith_waterman.py``): standard ``gap_open=o,
gap_extend=e`` is ``PairwiseAligner(mode="local", open_gap_score=-o, extend_gap_score=-e)``;
Biopython's ``open_gap_score`` is the score of the first gap position, not a surcharge on top
of the extension.  :meth:`Scoring.biopython_aligner` builds that aligner.

A :class:`Scoring` holds only names and numbers, so it pickles and hashes (it travels with Ray
tasks and keys caches); the parasail matrix and the numpy tables behind it are built lazily and
cached once per process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "Scoring",
    "PROTEIN_MATRICES",
    "DNA_MATRICES",
    "CONVENTIONS",
    "detect_alphabet",
    "validate",
]

CONVENTIONS = ("standard", "blast")

# parasail ships BLOSUM30..100 and PAM10..500; the names are read from the module so the list
# stays true to the installed version.
def _parasail_protein_names() -> tuple[str, ...]:
    import parasail

    names = [n for n in dir(parasail) if re.fullmatch(r"(blosum|pam)\d+", n)]
    return tuple(sorted(names, key=lambda n: (n.rstrip("0123456789"), int(re.sub(r"\D", "", n)))))


PROTEIN_MATRICES: tuple[str, ...] = _parasail_protein_names()

# Every spelling people use for the full IUPAC nucleotide matrix; all are the same table
# (NCBI's NUC.4.4 = EMBOSS's EDNAFULL = parasail's nuc44/dnafull).
_NUC44_ALIASES = {"nuc44", "nuc.4.4", "nuc4.4", "ednafull", "dnafull"}
DNA_MATRICES: tuple[str, ...] = ("nuc44", "match:M,mismatch:X[,alphabet:ACGTN]")

_MATCH_RE = re.compile(
    r"match\s*:\s*(?P<match>[+-]?\d+)\s*,\s*mismatch\s*:\s*(?P<mismatch>[+-]?\d+)"
    r"(?:\s*,\s*alphabet\s*:\s*(?P<alphabet>[A-Za-z*]+))?"
)

_NUCLEOTIDE_CORE = frozenset("ACGTUN")
_IUPAC_NUCLEOTIDE = frozenset("ACGTURYSWKMBDHVN")
# Below this length a protein can be spelled with A/C/G/T alone by chance (GAGA...), so a short
# record is never called DNA against a protein matrix.
_MIN_LEN_TO_CALL_DNA = 20
_DNA_CORE_FRACTION = 0.9
# Against a nucleotide matrix a record is called protein only when most of it is ambiguity codes:
# real reads can carry many N/R/Y, but hardly ever a majority.
_MIN_LEN_TO_CALL_PROTEIN = 10
_PROTEIN_CORE_FRACTION = 0.5


@dataclass(frozen=True)
class Scoring:
    """A local-alignment scoring scheme, named rather than materialised so that it pickles.

    Build it with :meth:`create`, which checks the values; the constructor trusts its arguments.
    """

    matrix: str
    gap_open: int
    gap_extend: int
    convention: str = "standard"
    alphabet: str = "protein"

    @classmethod
    def create(
        cls,
        matrix: str = "blosum62",
        gap_open: int = 11,
        gap_extend: int = 1,
        convention: str = "standard",
    ) -> "Scoring":
        """Check and canonicalise a scoring scheme.

        Penalties are given as positive costs (``gap_open=11`` costs 11).  In the standard
        convention ``gap_open >= gap_extend`` is required: otherwise closing a gap and opening a new
        one right away is cheaper than extending it, the affine model stops meaning "one gap", and
        the recurrences used by parasail and by the reference no longer agree with Biopython's.
        """
        if not isinstance(matrix, str) or not matrix.strip():
            raise ValueError(f"matrix must be a name such as 'blosum62', 'nuc44' or "
                             f"'match:2,mismatch:-3', got {matrix!r}")
        name, alphabet = _canonical_matrix(matrix)
        if convention not in CONVENTIONS:
            raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
        go = _as_cost(gap_open, "gap_open")
        ge = _as_cost(gap_extend, "gap_extend")
        if convention == "standard" and go < ge:
            raise ValueError(
                f"gap_open ({go}) < gap_extend ({ge}) under the standard convention (a gap of length "
                f"L costs open + (L-1)*extend): reopening would beat extending; use gap_open >= "
                f"gap_extend, or convention='blast' if these are BLAST-style numbers")
        return cls(matrix=name, gap_open=go, gap_extend=ge, convention=convention, alphabet=alphabet)

    # ----- the standard-convention numbers every kernel uses -----
    @property
    def open(self) -> int:
        """Cost of a gap of length 1, i.e. parasail's ``open`` (BLAST charges open+extend there)."""
        return self.gap_open + self.gap_extend if self.convention == "blast" else self.gap_open

    @property
    def extend(self) -> int:
        return self.gap_extend

    def gap_cost(self, length: int) -> int:
        """Cost of one gap of ``length`` positions under this scheme's convention."""
        if length < 1:
            raise ValueError(f"gap length must be >= 1, got {length}")
        return self.open + (length - 1) * self.extend

    # ----- tables -----
    @property
    def letters(self) -> frozenset[str]:
        """Upper-case letters the matrix scores; anything else is rejected by :func:`validate`."""
        return _tables(self.matrix)[2]

    @property
    def max_score(self) -> int:
        """Largest substitution score, the bound that decides which integer width can hold a score."""
        return int(_tables(self.matrix)[0].max())

    def parasail_matrix(self):
        """The parasail matrix object, built once per process (it wraps a C pointer and cannot be pickled)."""
        return _parasail_matrix(self.matrix)

    def score_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores[size, size] int32, codes[256] intp): the same numbers parasail uses, for numpy code.

        ``codes`` maps a byte (either case) to its row; bytes outside the alphabet map to the
        matrix's catch-all row, which :func:`validate` keeps sequences away from.
        """
        scores, codes, _ = _tables(self.matrix)
        return scores, codes

    def substitution(self, a: str, b: str) -> int:
        scores, codes, _ = _tables(self.matrix)
        return int(scores[codes[ord(a.upper())], codes[ord(b.upper())]])

    def biopython_aligner(self):
        """A Biopython local aligner scoring exactly like this scheme (the test oracle)."""
        from Bio.Align import PairwiseAligner, substitution_matrices

        scores, codes, letters = _tables(self.matrix)
        alpha = "".join(sorted(letters))
        idx = [int(codes[ord(c)]) for c in alpha]
        arr = substitution_matrices.Array(alpha, dims=2,
                                          data=scores[np.ix_(idx, idx)].astype(float))
        return PairwiseAligner(mode="local", substitution_matrix=arr,
                               open_gap_score=-self.open, extend_gap_score=-self.extend)

    def __str__(self) -> str:
        return f"{self.matrix} {self.gap_open}/{self.gap_extend} ({self.convention})"


def _as_cost(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)):
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{what} must be an integer (parasail scores in integers), got {value!r}")
    value = int(value)
    if value < 0:
        raise ValueError(f"{what} is a cost and must be >= 0 (11 means -11 per gap), got {value}")
    return value


def _canonical_matrix(matrix: str) -> tuple[str, str]:
    key = matrix.strip().lower().replace(" ", "")
    if key in PROTEIN_MATRICES:
        return key, "protein"
    if key in _NUC44_ALIASES:
        return "nuc44", "dna"
    m = _MATCH_RE.fullmatch(key)
    if m:
        match, mismatch = int(m["match"]), int(m["mismatch"])
        if match <= 0:
            raise ValueError(f"match score must be > 0 for local alignment, got {match}")
        if mismatch >= match:
            raise ValueError(f"mismatch ({mismatch}) must score below match ({match})")
        alpha = (m["alphabet"] or "ACGT").upper()
        if len(set(alpha)) != len(alpha):
            raise ValueError(f"repeated letter in alphabet {alpha!r}")
        suffix = f",alphabet:{alpha}" if alpha != "ACGT" else ""
        return f"match:{match},mismatch:{mismatch}{suffix}", "dna"
    known = ", ".join(PROTEIN_MATRICES[:3]) + ", ..., nuc44, match:2,mismatch:-3"
    raise ValueError(f"unknown substitution matrix {matrix!r}; known: {known}")


@lru_cache(maxsize=None)
def _parasail_matrix(name: str):
    import parasail

    if name in PROTEIN_MATRICES:
        return getattr(parasail, name)
    if name == "nuc44":
        return parasail.nuc44
    m = _MATCH_RE.fullmatch(name)
    if m is None:  # pragma: no cover - names reach here only through _canonical_matrix
        raise ValueError(f"unknown substitution matrix {name!r}")
    return parasail.matrix_create(m["alphabet"] or "ACGT", int(m["match"]), int(m["mismatch"]))


@lru_cache(maxsize=None)
def _tables(name: str) -> tuple[np.ndarray, np.ndarray, frozenset[str]]:
    pm = _parasail_matrix(name)
    scores = np.array(pm.matrix, dtype=np.int32, copy=True)
    codes = np.array(pm.mapper, dtype=np.intp, copy=True)
    # parasail sends every byte it does not know to the last row; a letter is in the alphabet when
    # it has a row of its own.  Protein matrices also score '*' (stop) in that last row.
    catch_all = pm.size - 1
    letters = {chr(c) for c in range(ord("A"), ord("Z") + 1) if codes[c] != catch_all}
    if name in PROTEIN_MATRICES:
        letters.add("*")
    scores.setflags(write=False)
    codes.setflags(write=False)
    return scores, codes, frozenset(letters)


# ----------------------------------------------------------------------------- checks

def _core_fraction(seq: str) -> float:
    return sum(seq.count(c) for c in _NUCLEOTIDE_CORE) / len(seq)


def detect_alphabet(seqs: Iterable[str]) -> str:
    """"dna" when every sequence is spelled with IUPAC nucleotide codes, mostly A/C/G/T/U/N.

    Used to pick a default matrix; a declared matrix always wins over detection.  Upper/lower case
    is ignored.  Raises on an empty collection because there is nothing to decide from.
    """
    seen = False
    for s in seqs:
        seen = True
        s = _as_text(s).upper()
        if not s:
            continue
        if not set(s) <= _IUPAC_NUCLEOTIDE:
            return "protein"
        if _core_fraction(s) < _DNA_CORE_FRACTION:
            return "protein"
    if not seen:
        raise ValueError("detect_alphabet needs at least one sequence")
    return "dna"


def _as_text(s) -> str:
    if isinstance(s, str):
        return s
    if isinstance(s, (bytes, bytearray, memoryview)):
        return bytes(s).decode("latin-1")
    raise TypeError(f"sequences must be str or bytes, got {type(s).__name__}")


def validate(
    seqs: Sequence[str],
    scoring: Scoring,
    names: Sequence[str] | None = None,
    *,
    what: str = "sequence",
    check_alphabet: bool = True,
) -> list[str]:
    """Reject what the kernels would silently mis-score, and return the sequences upper-cased.

    parasail maps any unknown byte to a catch-all row and Biopython raises deep inside its C code,
    so both an empty record and a stray letter ('U', '-', a digit, a space) are caught here, with
    the record's name, the letter and its 1-based position, before any cell is computed.

    With ``check_alphabet`` a record must also look like the kind of sequence the matrix is for:
    DNA against BLOSUM passes the letter check (A/C/G/T are amino acids) but is meaningless, and a
    protein spelled with IUPAC codes can slip past NUC.4.4.  Records shorter than 20 letters are
    never called DNA against a protein matrix, since short peptides can be all A/C/G/T.
    """
    if isinstance(seqs, (str, bytes)):
        raise TypeError(f"expected a sequence of {what}s, got a single {type(seqs).__name__}")
    if not isinstance(scoring, Scoring):
        raise TypeError(f"scoring must be a Scoring (Scoring.create(...)), got {type(scoring).__name__}")
    seqs = list(seqs)
    if names is not None:
        names = list(names)
        if len(names) != len(seqs):
            raise ValueError(f"{len(names)} names for {len(seqs)} {what}s")
    letters = scoring.letters
    out: list[str] = []
    for i, raw in enumerate(seqs):
        label = repr(str(names[i])) if names is not None else f"#{i}"
        s = _as_text(raw).upper()
        if not s:
            raise ValueError(f"{what} {label} is empty")
        chars = set(s)
        bad = chars - letters
        if bad:
            pos = min(s.index(c) for c in bad)
            shown = "".join(sorted(bad))
            hint = (" (a match/mismatch matrix scores only its alphabet, ACGT unless ',alphabet:...' "
                    "says otherwise; use 'nuc44' to score IUPAC codes such as N)"
                    if scoring.matrix.startswith("match:") and bad & _IUPAC_NUCLEOTIDE else "")
            raise ValueError(
                f"{what} {label}: letter {s[pos]!r} at position {pos + 1} is not in the "
                f"{scoring.matrix} alphabet {''.join(sorted(letters))!r} "
                f"(all letters outside it: {shown!r}){hint}")
        if check_alphabet:
            # the letter counts only where a test needs them: a protein record with any letter
            # outside IUPAC's nucleotide codes is not DNA, whatever they say (20,000 proteins:
            # 0.13 -> 0.08 CPU s, on the run's critical path: the app reads before the run)
            frac = _core_fraction(s) if scoring.alphabet == "dna" or chars <= _IUPAC_NUCLEOTIDE \
                else 0.0
            if (scoring.alphabet == "protein" and len(s) >= _MIN_LEN_TO_CALL_DNA
                    and frac >= _DNA_CORE_FRACTION and chars <= _IUPAC_NUCLEOTIDE):
                raise ValueError(
                    f"{what} {label} looks like DNA ({frac:.0%} of its {len(s)} letters are "
                    f"A/C/G/T/U/N) but {scoring.matrix} is a protein matrix; use a nucleotide "
                    f"matrix, or check_alphabet=False if it really is a protein")
            if (scoring.alphabet == "dna" and len(s) >= _MIN_LEN_TO_CALL_PROTEIN
                    and frac < _PROTEIN_CORE_FRACTION):
                raise ValueError(
                    f"{what} {label} looks like protein (only {frac:.0%} of its {len(s)} letters are "
                    f"A/C/G/T/U/N) but {scoring.matrix} is a nucleotide matrix; use a protein "
                    f"matrix, or check_alphabet=False if it really is DNA")
        out.append(s)
    return out
