"""The tool-farm engine: an unmodified program (BLAST+, HMMER, Clustal Omega ...) over every
unit of a big input, on every core of every node, journaled and resumable.

    spec.py      FarmSpec: the program's argument list, the cut, the feed, shared files,
                 per-node preparation, output streams, segmentation
    units.py     cutting inputs into units of whole records (byte ranges), the smaller tail
    shared.py    shared files materialised and prepared once per node (digest, lock, stamp)
    tool.py      one unit through the tool (no shell), per volume, merged
    segment.py   database volumes and the merge of their hits
    sizing.py    UnitSizer: the tool's measured throughput curve -> unit size (the policy)
    dispatch.py  UnitQueue: hand-out, prefetch depth, stealing, retries, failures (the policy)
    writer.py    BlockWriter: double-buffered, one file per node and stream
    index.py     the blocks' index in the run's journal; replay with CRC checks
    gather.py    one stream in input order, CRCs checked
    local.py     a small farm on threads of this process, no Ray
    raydrive.py  a farm on Ray: actors, hand-out, journal
    actors.py    FarmWorker, NodeWriter (Ray)
    driver.py    farm(): the run, the first units measured, in-process or Ray
"""
