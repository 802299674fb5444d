"""The Jaccard app's check of a record (the pre-flight's): where the app was built it looks the
record's set size up instead of scanning its windows; on drawn records (letters of every kind,
lengths around k, both strands' settings, several files) it must name exactly the records an
independent regex finds without a window of k A/C/G/T letters, as the workers' slim copy (which
scans) does."""
from __future__ import annotations

import pickle
import random
import re

import pytest

from pairflow.apps.jaccard import JaccardApp
from pairflow.engine import InputError

LETTERS = "ACGTacgtNnRYX-"


def _record(rng: random.Random, k: int) -> str:
    n = rng.choice([0, 1, k - 1, k, k + 1, rng.randrange(0, 4 * k + 2)])
    if rng.random() < 0.5:  # mostly clean: A/C/G/T, a few others
        return "".join(rng.choice("ACGTacgt" if rng.random() < 0.9 else "NRX")
                       for _ in range(n))
    return "".join(rng.choice(LETTERS) for _ in range(n))


def _bad(seq: str, k: int) -> bool:
    """No window of k A/C/G/T letters (a regex, independent of the app)."""
    return re.search(f"[ACGT]{{{k}}}", seq.upper()) is None


@pytest.mark.parametrize("seed", range(6))
def test_record_check_names_exactly_the_records_without_a_kmer(tmp_path, seed):
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3, 5, 7, 11, 21])
    canonical = rng.random() < 0.5
    files, truth = [], {}
    for f in range(rng.randint(1, 3)):
        path = tmp_path / f"in{f}.fa"
        recs = [(f"r{f}_{i}", _record(rng, k)) for i in range(rng.randint(1, 40))]
        recs.append((f"r{f}_good", "ACGT" * (k // 4 + 2)))  # one good record at least
        path.write_text("".join(f">{n}\n{s}\n" for n, s in recs))
        files.append(str(path))
        truth.update({n: _bad(s, k) for n, s in recs})
    app = JaccardApp(files, k=k, item="record", canonical=canonical, on_bad_record="fail")
    slim = pickle.loads(pickle.dumps(app))  # the workers' copy: scans the record's windows
    assert sorted(key.split("/", 1)[1] for key in app.keys()) == sorted(truth)
    for key in app.keys():
        name = key.split("/", 1)[1]
        for who in (app, slim):
            if truth[name]:
                with pytest.raises(InputError) as e:
                    who.check(key, None)
                assert e.value.record == name and f"no valid {k}-mer" in str(e.value)
            else:
                who.check(key, None)
