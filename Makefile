# The two commands. Both set everything up first (venv, pip packages, Debian tools and data).
.PHONY: setup run test test-fast bench

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/pairflow $(ARGS)

# All tests, slow and multi-node ones included (that is what CI runs), on two pytest-xdist
# workers, a module at a time; a test marked multinode runs with no other engine test beside it
# (tests/conftest.py says why). TEST_WORKERS=0 runs them in one process, one at a time.
TEST_WORKERS ?= 2
test: setup
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 .venv/bin/python -m pytest -p no:cacheprovider \
		-n $(TEST_WORKERS) --no-loadscope-reorder tests $(ARGS)

# Unit tests only: no Ray, a few seconds.
test-fast: setup
	.venv/bin/python -m pytest -q tests/unit $(ARGS)

# Every benchmark, then benchmarks/RESULTS.md, benchmarks/plots/ and the README's headline block
# (ARGS=--quick for each benchmark's quick mode, ARGS="--only allpairs align" for some).
bench: setup
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 .venv/bin/pairflow bench $(ARGS)
