"""huge_page_advice: numpy's transparent-huge-page advice in a computing process, by the rule
(``wants_huge_pages``), from the balloon's features (``reports_free_pages``); and the advice's
effect seen in the kernel's own accounting (/proc/self/smaps), not through pairflow code."""
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from pairflow.engine.run.runtime import BALLOON_F_REPORTING, reports_free_pages, wants_huge_pages

ON, OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def _oracle(setting: str, numpy_set: bool, reporting: bool):
    word = setting.strip().lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    return None if numpy_set else not reporting


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(ON + OFF + ("auto", " On ", "OFF", "")), st.text(max_size=6)),
       st.booleans(), st.booleans())
def test_the_rule_against_its_table(setting, numpy_set, reporting):
    assert wants_huge_pages(setting, numpy_set, reporting) == _oracle(setting, numpy_set,
                                                                      reporting)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text("01", max_size=64), max_size=3))
def test_free_page_reporting_is_bit_5_of_any_balloon(tmp_path_factory, devices):
    root = tmp_path_factory.mktemp("virtio_balloon")
    for i, bits in enumerate(devices):
        os.makedirs(root / f"virtio{i}")
        (root / f"virtio{i}" / "features").write_text(bits + "\n")
    expected = any(len(b) > BALLOON_F_REPORTING and b[BALLOON_F_REPORTING] == "1"
                   for b in devices)
    assert reports_free_pages(str(root / "*" / "features")) == expected


def test_no_balloon_no_reporting(tmp_path):
    assert not reports_free_pages(str(tmp_path / "*" / "features"))


PROBE = textwrap.dedent("""
    import numpy as np
    from pairflow.engine.run.runtime import keep_freed_memory, huge_page_advice
    keep_freed_memory()
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        from numpy.core.multiarray import _set_madvise_hugepage
    now = _set_madvise_hugepage(True)  # returns the setting it replaces
    _set_madvise_hugepage(now)
    def huge_kb():  # the process's anonymous huge pages (madvise splits the array's mapping)
        return sum(int(line.split()[1]) for line in open("/proc/self/smaps")
                   if line.startswith("AnonHugePages:"))
    before = huge_kb()
    a = np.ones(64 << 17)  # 64 MB, written
    huge = huge_kb() - before
    print(int(now), huge_page_advice(), huge)
""")


def _probe(setting: str) -> tuple[bool, str, int]:
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    env["PAIRFLOW_HUGE_PAGES"] = setting
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    return out[0] == "1", out[1], int(out[2])


def test_the_setting_reaches_numpy():
    assert _probe("off")[:2] == (False, "False")
    assert _probe("on")[:2] == (True, "True")
    want = not reports_free_pages()  # this machine's balloon, read here independently
    assert _probe("auto")[:2] == (want, str(want))


def _thp_mode() -> str:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return ""
    return text[text.find("[") + 1:text.find("]")]


@pytest.mark.skipif(_thp_mode() != "madvise", reason="THP only on advice: the advice's effect")
def test_without_the_advice_a_large_array_gets_no_huge_pages():
    """THP "madvise": only numpy's advice gives an array huge pages. With it the kernel may
    still fall back to small pages (no 2 MB block free at that moment: rare), hence 3 tries."""
    assert _probe("off")[2] == 0
    assert any(_probe("on")[2] > 0 for _ in range(3))
