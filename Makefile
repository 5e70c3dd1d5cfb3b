# ddlbench: the two commands of the README are `make demo` and `make test`.
# Slow builds and the virtual environment live outside the checkout, keyed by version, so that
# only a fresh machine pays for them.
SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/ddlbench
TORCH_PIN ?= torch==2.14.1 torchvision==0.29.1
# torch's CUDA build: PyPI's (CUDA 13.0, driver >= 580) by default. Nodes with an older driver (`ddlbench doctor
# system=<profile>` on a compute node names the build that fits) take one of PyTorch's own builds, in a venv of
# their own: make venv TORCH_CUDA=cu126 (or cu128, cu130; cpu for no CUDA)
TORCH_CUDA ?=
VENV ?= $(CACHE)/venv-py311-torch2.14.1$(if $(TORCH_CUDA),-$(TORCH_CUDA))
TORCH_INDEX := $(if $(TORCH_CUDA),--index-url https://download.pytorch.org/whl/$(TORCH_CUDA))
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test test-fast test-matrix papers papers-runs docs-cli lint browser venv deepspeed dali horovod mpi nlp slurm-up slurm-down podman clean-demo

$(VENV)/.ok:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_INDEX) $(TORCH_PIN)
	touch $@

venv: $(VENV)/.ok
	$(PIP) install -q -e '.[test,telemetry]'

demo: venv
	$(VENV)/bin/ddlbench demo

# The test tiers (docs/testing.md). What a test needs (multiproc, slurm, horovod, deepspeed, dali, browser,
# netns) is marked by the fixtures it uses (tests/conftest.py); every run prints the 25 slowest tests.
# test: everything the tests exercise is real (DeepSpeed, DALI, Horovod built once and cached, Slurm +
# OpenMPI, chromium); the lint (ruff check and ruff format --check, about a second) comes first.
# -n 2: both cores (pytest-xdist); loadgroup keeps the tests of the session's shared runs on one worker
# bytecode caches on, whatever the environment says: every rank process and each xdist worker's collection
# (pytest's rewritten test modules) would otherwise compile the project's sources anew (collection 10.9 -> 7.0 s)
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(PY) -m pytest -q --durations=25 -n 2 --dist loadgroup
FAST_TIER := not (multiproc or slurm or horovod or deepspeed or dali or browser or netns or container or slow or heavy or matrix)

test: lint deepspeed dali horovod mpi nlp slurm-up browser podman
	$(PYTEST) -m "not matrix" tests

# after every change: no subprocess, no training run, no Slurm; Hypothesis at a quarter of its examples.
# --dist worksteal: the fast tier shares no resource, so a core that runs out of tests takes some of the
# other's (86-90 s against 98-110 s under --dist load, alternating; docs/results/2026-12-04-cpu.md)
test-fast: lint
	$(PYTEST:loadgroup=worksteal) -m "$(FAST_TIER)" --hypothesis-profile=fast tests

# the full framework x model x mode matrices, whose representative diagonal `make test` runs
test-matrix: deepspeed dali horovod mpi nlp
	$(PYTEST) -m matrix tests

# the papers' gallery (docs/papers/<study>.md) from the runs committed under docs/papers/runs/
papers: venv
	$(PY) -m analysis.papers.gallery docs/papers

# those runs: the CPU miniatures of the three studies, made anew (a few minutes on 2 cores; needs the
# frameworks and namespace hosts: make deepspeed dali horovod mpi, and root for ip netns)
papers-runs: deepspeed dali horovod mpi
	PY=$(PY) bash docs/papers/make_runs.sh docs/papers/runs

# docs/cli.md, the command reference, from the parsers (tests/unit/test_clidoc.py holds it to them)
docs-cli: venv
	$(PY) -m ddlbench.clidoc > docs/cli.md

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# the report's browser test: Debian's chromium (~20 s to install) driven by playwright (no browser download)
browser: venv
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	$(PIP) install -q 'playwright>=1.40'

# DS_BUILD_OPS=0: a pure-python install (~10 s); the adapter needs no compiled op (torch optimizer,
# shm_comm marked unavailable), so nothing is JIT-built at run time either
deepspeed: venv
	DS_BUILD_OPS=0 $(PIP) install -q -e '.[deepspeed]'

# DALI's wheel must match torch's CUDA: cuda130 for CUDA 13 (CI's torch, the H200);
# CUDA 12 machines: make dali DALI_EXTRA=dali. tfrecord: crc32c, to write TFRecords fast
DALI_EXTRA ?= $(if $(filter cu11% cu12%,$(TORCH_CUDA)),dali,dali-cuda130)
dali: venv
	$(PIP) install -q -e '.[$(DALI_EXTRA),tfrecord]'

# Horovod 0.28.1 from source with the fixes today's torch needs (Gloo + MPI on CPU, NCCL on GPU);
# the wheel is cached in $(CACHE)/wheels keyed by horovod + torch + CUDA + python + ops
horovod: venv
	$(PIP) install -q -e '.[horovod]'  # horovod's runtime deps (cffi, cloudpickle, ...): the wheel is installed without them
	DDLBENCH_CACHE=$(CACHE) tools/build_horovod.sh $(PY)

# mpi4py (a wheel; it loads the MPI library at run time: OpenMPI comes with slurm-up), for commbench --backends mpi
mpi: venv
	$(PIP) install -q -e '.[mpi]'

# transformers (pure python; a few binary wheels), for model=bert: BERT is built from a config, nothing downloaded.
# The current major (5.x), which users install today, also where a venv still holds 4.x (the extra allows both)
nlp: venv
	$(PIP) install -q -e '.[nlp]' 'transformers>=5,<6'

# podman (Debian's) for the container tests (docs/containers.md): runc, because the default crun cannot set
# RLIMIT_NOFILE in these machines' containers, and ulimits below the host's (podman refuses to raise them to
# them); a containers.conf is written only where the machine has none of its own. busybox-static: the test
# image's root file system (tests/conftest.py podman_image)
podman:
	command -v podman >/dev/null && command -v runc >/dev/null && test -x /bin/busybox || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc busybox-static)
	test -e /etc/containers/containers.conf || printf '%s\n' '[containers]' \
		'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]' '' '[engine]' 'runtime = "runc"' \
		> /etc/containers/containers.conf

# a real single-node Slurm (slurmctld, slurmd, munge) + OpenMPI; state in $(CACHE)/slurm
slurm-up:
	DDLBENCH_CACHE=$(CACHE) bash slurm/local_cluster.sh up

slurm-down:
	DDLBENCH_CACHE=$(CACHE) bash slurm/local_cluster.sh down
