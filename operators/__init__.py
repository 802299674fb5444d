"""What pipelines read and write: sources (in-memory arrays, Parquet, Dask, ROOT files through
uproot; ``arrays.as_source`` takes anything a pipeline can read), sinks (a Parquet dataset, a
histogram), small columnar operators, and ``sequences``: sequence files (FASTA, FASTQ, GenBank,
Swiss-Prot) read, checked and catalogued as the items of all-pairs runs.
"""
