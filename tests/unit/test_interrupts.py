"""A Ctrl-C that something swallows on the way still stops the wait: real SIGINTs, sent by a
fresh interpreter to itself (so the test's own process keeps its handlers)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from engine.run.interrupts import catching_ctrl_c, raise_if_interrupted

def swallowed():  # as a library's `except BaseException` or a finalizer would
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        pass

def mine(signum, frame):
    print("my handler")

out = []
try:
    with catching_ctrl_c():
        swallowed()
        raise_if_interrupted()
    out.append("not raised")
except KeyboardInterrupt:
    out.append("raised")
out.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
with catching_ctrl_c():  # a fresh wait: the interrupt before it is forgotten
    raise_if_interrupted()
    out.append("fresh")
signal.signal(signal.SIGINT, mine)
with catching_ctrl_c():  # the user's own handler stays
    out.append(signal.getsignal(signal.SIGINT) is mine)
print(out)
"""


def test_a_swallowed_ctrl_c_is_raised_again_and_handlers_are_restored():
    out = subprocess.run([sys.executable, "-c", SCRIPT, ROOT], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['raised', True, 'fresh', True]", out.stdout
