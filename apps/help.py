"""``pairflow --help``: the apps (the configs ``app=`` takes, each summed up by its config's first
comment), the subcommands and a short tour. Kept apart from the command's mechanism (cli.py) so
the text is one place to keep true."""
from __future__ import annotations

import os

from pairflow.configs import CONFIG_DIR

TOUR = """\
  pairflow                                        Jaccard of the 16 bundled genomes (local Ray)
  pairflow data.inputs=a.fa,b.fa data.k=15        your own genomes, another k
  pairflow data.item=record sink=threshold sink.t=0.2   one item per record, pairs >= 0.2
  pairflow scheduler=zorder cache.host_cache_items=4    the Z-order/LRU baseline, a small cache
  pairflow app=align data.queries=q.fa data.targets=db.fa align.top_k=5
  pairflow app=jaccard_filtered filter.t=0.5      skip the pairs a sketch rules out
  pairflow app=hep hep.order=poor                 a filter pipeline that fixes its own order
  pairflow --cfg job app=align                    print an app's resolved config, run nothing
  pairflow app=farm farm=blastp farm.queries=q.fa farm.db=db.fa   blastp over every core
  pairflow gather runs/farm/<timestamp> stdout -o hits.tsv   a farm's output in order
  pairflow dashboard runs/jaccard/<timestamp>     watch a run (live or finished)"""


def _summary(path: str) -> str:
    """What an app config does, in its own words: its first comment up to the first stop."""
    import re
    words = []
    with open(path) as fh:
        for line in fh:
            text = line.strip()
            if not text.startswith("#"):
                if words:
                    break
                continue
            if not text.startswith("# @package"):
                words.append(text.lstrip("#").strip())
    return re.split(r"\. |\.$|: | \(", " ".join(words), maxsplit=1)[0]


def help_text() -> str:
    """``pairflow --help``: the apps (the configs ``app=`` takes), the subcommands, a tour."""
    app_dir = os.path.join(CONFIG_DIR, "app")
    names = sorted(f[:-5] for f in os.listdir(app_dir) if f.endswith(".yaml"))
    width = max(len(n) for n in names) + 2
    apps = "\n".join(f"  {n:<{width}}{_summary(os.path.join(app_dir, n + '.yaml'))}"
                     for n in names)
    return f"""\
pairflow: dataflow runs on Ray for data-intensive science.

usage: pairflow [-v] [app=NAME] [KEY=VALUE ...]   a run, configured by Hydra overrides
       pairflow dashboard RUN_DIR                 the dashboard of a run directory
       pairflow gather RUN_DIR STREAM [-o FILE]   a farm's output stream in input order
       pairflow bench [--quick] [--only NAME ...]  the benchmarks and their report
       pairflow data install | where              fetch the example data | print their folder
       pairflow --help | --hydra-help             this text | Hydra's own help

apps (app=NAME; the default is jaccard):
{apps}

subcommands:
  dashboard RUN_DIR  Streamlit dashboard of a run, live or finished (pairflow dashboard --help)
  gather RUN_DIR STREAM [-o FILE]
                     a farm's stream (stdout, tblout ...) in input order, every CRC checked
  bench [--quick] [--only NAME ...] [--out DIR] [--report-only]
                     every benchmark of benchmarks/, then RESULTS.md and plots from their JSON
  data install [--only STEP ...] [--force] | data where
                     the example data directory (PAIRFLOW_DATA, else the user data directory):
                     fill it (Debian data packages, the derived sets), or print it

options:
  -v, --verbose      show the full traceback when a run fails (or set PAIRFLOW_DEBUG=1)
  --cfg job          print the resolved config instead of running
  -m, --multirun     sweep: data.k=15,21 runs once per value (input lists then need quotes)
  KEY=VALUE          set a config key; a key the app does not have is refused, with the
                     closest known ones (++KEY=VALUE adds one on purpose)

a short tour:
{TOUR}
"""
