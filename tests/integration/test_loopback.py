"""A local Ray started through pairflow listens on the loopback interface only.

Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when it is imported; without it a local Ray's
servers (GCS, raylet, workers, agents) listen on every interface. ``import engine`` sets it, and
this test starts Ray in a fresh process whose environment lacks it, the way a user's REPL or the
``pairflow`` command would, then reads every listening TCP socket of that process tree from /proc.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = r'''
import json, os, sys
from pairflow import engine  # noqa: F401  (before Ray, as in the README's tour)
from pairflow.engine.run.runtime import init_ray
import ray

def tree(root):
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    parent[int(d)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    mine, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p and c not in mine:
                mine.add(c)
                frontier.append(c)
    return mine

def socket_inodes(pids):
    out = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    out.add(link[8:-1])
        except OSError:
            pass
    return out

def listening(inodes):
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            next(fh)
            for line in fh:
                f = line.split()
                if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                    found.append(f[1].split(":")[0])
    return found

init_ray(num_cpus=1, object_store_mb=100)
print(json.dumps(listening(socket_inodes(tree(os.getpid())))))
ray.shutdown()
'''


def _loopback(hex_addr: str) -> bool:
    if len(hex_addr) == 8:  # IPv4, little-endian: 0100007F is 127.0.0.1
        return bytes.fromhex(hex_addr)[::-1][0] == 127
    words = [hex_addr[i:i + 8] for i in range(0, 32, 8)]
    if words[:2] == ["00000000", "00000000"] and words[2] == "FFFF0000":  # ::ffff:a.b.c.d
        return bytes.fromhex(words[3])[::-1][0] == 127
    return hex_addr == "00000000000000000000000001000000"  # ::1


def test_a_local_ray_listens_on_loopback_only():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    addresses = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(addresses) >= 3, addresses  # GCS, raylet and the workers at least
    assert all(_loopback(a) for a in addresses), addresses
    # the oracle itself: 0.0.0.0 and a public address are not loopback
    assert not _loopback("00000000") and not _loopback("0202000A") and _loopback("0100007F")
