# `make run` and `make test` work on a fresh machine with only Python 3.10+ (and make):
# each builds .venv first. `make run` pretrains the default model, `make test` runs pytest.
# TORCH picks the torch build; the default is the CPU build these project machines keep on
# disk. Elsewhere, e.g.: make test TORCH=torch
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0

.PHONY: setup run run-gpu test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q "$(TORCH)"
	$(VENV)/bin/python -m pip install -q -e ".[test,plot]"
	touch $@

setup: $(VENV)/.installed

# Pretrain; one line of probes beside the random init (kept as runs/mlm-en/probes.json, whose unigram and
# bigram levels the loss plot draws), the loss curves, what the model guesses beside its random init; then
# fine-tune that checkpoint on the movie-review sentiment split and draw its curves.
# --resume: running it again continues the same pretraining run (when finished: says so, changes nothing);
# --overwrite: the fine-tuning run is done afresh each time, with finetune.py's default recipe (picked on
# validation for this checkpoint: docs/finetuning.md).
run: setup
	$(VENV)/bin/python train_mlm.py --out runs/mlm-en --resume
	$(VENV)/bin/python probe.py --summary runs/mlm-en
	$(VENV)/bin/python plot_metrics.py runs/mlm-en/metrics.jsonl
	$(VENV)/bin/python fill_mask.py --checkpoint runs/mlm-en --examples --beside-random-init --top-k 5
	$(VENV)/bin/python finetune.py --checkpoint runs/mlm-en --out runs/cls-en --overwrite --no-progress
	$(VENV)/bin/python plot_metrics.py runs/cls-en/metrics.jsonl

# The GPU recipe (docs/pretraining.md): bert-small on the larger corpus, about 2 min on an H200,
# perhaps 10-20 min on a laptop GPU (an estimate). --short-fraction 0: one phase, as it was measured
# (the short first phase was tried on the CPU only). It needs a torch that sees a GPU: build .venv with
# your platform's torch (make clean; make run-gpu TORCH=torch); it stops at once on a CPU-only torch.
run-gpu: setup
	@$(VENV)/bin/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() or torch.backends.mps.is_available() else 'run-gpu: this torch sees no GPU (torch ' + torch.__version__ + '); rebuild .venv with a GPU build: make clean; make run-gpu TORCH=torch')"
	$(VENV)/bin/python train_mlm.py --corpus en-large --preset bert-small --batch-size 64 --max-steps 5000 \
		--lr 7e-4 --dropout 0.1 --short-fraction 0 --out runs/mlm-gpu --resume
	$(VENV)/bin/python finetune.py --checkpoint runs/mlm-gpu --out runs/cls-gpu --head pooler --lr 1e-4 --overwrite --no-progress

test: setup
	$(VENV)/bin/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache
