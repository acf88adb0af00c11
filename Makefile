# dcoc: two commands for a newcomer -- `make demo` and `make test`.
# Both create a project-local virtualenv (.venv) on first use.  torch is installed first,
# as the CPU build from PyTorch's CPU wheel index when it is reachable, else from the
# default index (its newest +cpu build if the default pick would be CUDA; macOS/aarch64
# wheels are CPU-only anyway): tools/install_torch.py.  No multi-GB CUDA build is pulled.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
DCOC   := $(VENV)/bin/dcoc
STAMP  := $(VENV)/.dcoc-installed
# Test workers: pytest-xdist processes (2 cores on the reference machine).
JOBS   ?= 2
# PyTorch's CPU-only wheels (torch without the nvidia-* / triton wheels)
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install demo readme-demo test test-all lint bench bench-full clean help

help:
	@echo "make demo      install, then tune ResNet-18 for the pynq VTA on the simulator (about a minute)"
	@echo "make test      install, then run the default test suite"
	@echo "make test-all  also run the slow tests"
	@echo "make bench     quick benchmark suite -> docs/RESULTS.md, docs/img/*.png (~2 h: 25 min + 90 min of CPU tuning)"
	@echo "make lint      ruff check"
	@echo "make readme-demo  rewrite README.md's demo output from a fresh run"
	@echo "make clean     remove the virtualenv and caches"

install: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	TORCH_INDEX=$(TORCH_INDEX) $(PY) tools/install_torch.py
	$(PIP) install -q -e '.[test]'
	@touch $(STAMP)

demo: install
	$(DCOC) tune resnet18 --target vta --board pynq --trials 300 --seed 0 --work-dir runs/demo

readme-demo: install
	$(PY) tests/test_readme_demo.py --update

lint: install
	$(PY) -m ruff check .

test: install
	$(PY) -m pytest -q -n $(JOBS) --durations=15

test-all: install
	$(PY) -m pytest -q -n $(JOBS) -m "slow or not slow"

bench: install
	$(PY) -m scripts.bench --suite quick

bench-full: install
	$(PY) -m scripts.bench --suite full

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
