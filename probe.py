"""Probes of what a pretrained checkpoint has learned, beside its random-init twin and simple
baselines, on text it never pretrained on (minibert/run/probes.py says what each probe measures):

    python probe.py --checkpoint runs/mlm-en            # + its random init, baselines
    python probe.py --checkpoint runs/mlm-en minilm     # + MiniLM's frozen features (c)
    python probe.py --run runs/mlm-en                   # every checkpoint the run kept (--keep, 2 by default)
    python probe.py --summary runs/mlm-en               # one line (what `make run` prints), and probes.json

(a) masked-token loss and accuracy on the validation split, masked as train_mlm.py masks it,
beside unigram and bigram models counted on the training split; (b) number agreement (is/are,
was/were, has/have, does/do) on the validation split and on the labelled test sentences, beside
the more frequent form; (c) a logistic regression on the frozen [CLS] and mean-pooled final
hidden states of the labelled sentiment sentences, at nested seeded label budgets, beside
bag-of-words and the majority class.

--checkpoint takes checkpoint or train_mlm.py run folders (a run folder: its newest checkpoint),
`random:FOLDER` (FOLDER's config and tokenizer, fresh weights from its run's seed), and `minilm` (the
real pretrained MiniLM-L6; it has no MLM head, so only (c)). Every checkpoint named gets its random
twin beside it. --run probes every `checkpoints/step-NNNNNN` of one run, the random init as step
0, and draws each probe against the step. Both write results.json and report.md (and, for --run,
probes_vs_step.png) to --out: a folder that is new or empty, or one these probes wrote (its
run.json says "probes"); their files there are replaced, nothing else is ever written. --summary
of a train_mlm.py run folder also keeps its numbers there as probes.json (replaced each time),
where plot_metrics.py finds the unigram and bigram losses to draw beside the validation loss.

The probes measure a checkpoint as its run was trained: a train_mlm.py checkpoint's
training_state.pt holds the run's flags, and its corpus, --seq-len, --mask-prob and --seed are
used (so (a) is the valid_loss train_mlm.py reported, and the twin its step 0). Those flags given
here are for checkpoints without one (a HuggingFace folder; default: train_mlm.py's en, 128, 0.3,
0); one given that differs from a run's own is refused, as are runs of different corpus, --seq-len
or --mask-prob probed together (they share one masked text).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from data.prepare import CACHE, DataError, fetch_minilm, labelled_folder, prepare
from minibert import BertModel, CheckpointError, load_tokenizer
from minibert.checkpoint import NOT_FINITE, overflowing, read_config
from minibert.files import read_held, write_file
from minibert.run import die, os_problem, run_script, write_advice
from minibert.run.baselines import MAX_ITER as BOW_MAX_ITER
from minibert.run.baselines import L2_GRID, BagOfWords, majority_class
from minibert.run.flags import PROBABILITY, SEED, Parser, add_device, check_ranges
from minibert.run.folders import (check_run_folder, checkpoints, claim_run_folder, lock_holder, resolve_checkpoint,
                                   run_kind, said_for_its_run, write_json)
from minibert.run.labelled import InputError, label_subsets, scores
from minibert.run.probes import (PROBE_L2_GRID, PROBE_MAX_ITER, SOURCES, SUMMARY_FILE, ProbeText, frozen_probes,
                                 labelled_splits, load_mlm, random_twin, run_flags, summary, summary_line,
                                 twin_not_finite)
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, pyplot, table
from minibert.run.training import pick_device
from minibert.text import plain_tokenizer

PLOT = "probes_vs_step.png"  # --run's plot, in --out


def budget_name(n: int | None) -> str:
    return "all" if n is None else str(n)


def open_spec(spec: str, seeds: dict[str, int]) -> dict:
    """{"name", "spec", "path", "mlm" (a BertForMaskedLM, or None for MiniLM), "encoder", "tokenizer"};
    `seeds`: the twin's seed of each checkpoint folder (settle_flags)."""
    pretrained = not spec.startswith("random:")
    folder = spec if pretrained else spec[len("random:"):]
    if folder == "minilm":
        if not pretrained:
            die("random:minilm: MiniLM has no random twin here; name a minibert checkpoint")
        path = fetch_minilm()
        return finite_on_a_word({"name": "MiniLM-L6 (frozen features only)", "spec": spec, "path": path, "mlm": None,
                                 "encoder": BertModel.from_pretrained(path, use_sdpa=True, unpad=True).eval(),
                                 "tokenizer": load_tokenizer(path)})
    path = resolve_checkpoint(folder)
    if not all(os.path.lexists(os.path.join(path, name)) for name in ("config.json", "tokenizer.json")):
        die(f"{folder} is neither `minilm` nor a checkpoint folder with config.json and tokenizer.json; "
            "pretrain one first with `make run` (it writes runs/mlm-en)")
    try:
        mlm, tokenizer = load_mlm(path) if pretrained else random_twin(path, seeds[path]), load_tokenizer(path)
    except CheckpointError as e:
        die(said_for_its_run(path, e))
    if pretrained:
        where = os.path.normpath(folder) if path == folder else f"{os.path.normpath(folder)} ({os.path.basename(path)})"
        name = f"minibert {where}"
    else:
        name = f"random init ({os.path.normpath(folder)}'s config and tokenizer, seed {seeds[path]})"
    return finite_on_a_word({"name": name, "spec": spec, "path": path, "mlm": mlm, "encoder": mlm.bert,
                             "tokenizer": tokenizer})


@torch.no_grad()
def finite_on_a_word(model: dict) -> dict:
    """`model` (open_spec's), once its encoder gives finite numbers for one word, and its embedding
    layer for every token of its vocabulary alone: finite weights too large for float32 (a whole
    layer, or the embedding rows of a few tokens) are named now, before minutes of probing the
    models given before it."""
    encoder = model["encoder"]
    ids = torch.tensor([plain_tokenizer(model["tokenizer"]).encode("the").ids])  # (1, T)
    every = torch.arange(encoder.embeddings.word_embeddings.num_embeddings).unsqueeze(1)  # (V, 1)
    if overflowing(encoder(ids).last_hidden_state) or overflowing(encoder.embeddings(every, torch.zeros_like(every))):
        twin = model["spec"].startswith("random:")
        die(f"{model['spec']}: {twin_not_finite(encoder.config) if twin else 'the model ' + NOT_FINITE}")
    return model


def with_twins(specs: list[str]) -> list[str]:
    """Each plain checkpoint followed by its random twin (unless named already); order kept."""
    out = []
    for spec in specs:
        if spec not in out:
            out.append(spec)
        if spec != "minilm" and not spec.startswith("random:") and f"random:{spec}" not in specs:
            out.append(f"random:{spec}")
    return out


class Prober:
    """Everything the probes of one invocation share: the held-out text per tokenizer, the
    labelled splits and budgets, and the baselines (computed once)."""

    def __init__(self, args, texts, labels, names):
        self.args = args
        self.texts, self.labels, self.label_names = texts, labels, names
        keep = label_subsets(len(labels["train"]), args.budgets)
        self.subsets = {budget_name(n): rows for n, rows in zip(args.budgets, keep, strict=True)}
        self.prepared: dict[str, ProbeText] = {}
        self.baselines: dict[str, dict] = {}

    def text_for(self, tokenizer) -> ProbeText:
        key = tokenizer.to_str()
        if key not in self.prepared:
            a = self.args
            self.prepared[key] = ProbeText.build(tokenizer, a.corpus_folder, a.labelled_folder, a.seq_len, a.mask_prob)
            self.baselines[key] = self.prepared[key].baselines()
        return self.prepared[key]

    def probe(self, model: dict) -> dict:
        """(a) and (b) for a model with an MLM head, and (c) for every model."""
        t0 = time.time()
        out = {"name": model["name"], "spec": model["spec"], "path": model["path"]}
        try:  # finite weights that overflow on some tokens only: the error names the model
            if model["mlm"] is not None:
                text = self.text_for(model["tokenizer"])
                out.update(text.mlm_probes(model["mlm"], self.args.device))
                out["tokenizer"] = list(self.prepared).index(model["tokenizer"].to_str())
            out["frozen"] = frozen_probes(model["encoder"], model["tokenizer"], self.texts, self.labels, self.subsets,
                                          max_length=self.args.seq_len, device=self.args.device)
        except CheckpointError as e:
            raise CheckpointError(f"{model['spec']}: {e}") from None
        out["seconds"] = time.time() - t0
        print(f"  {model['name']}: {out['seconds']:.0f} s", file=sys.stderr, flush=True)
        return out

    def label_baselines(self) -> dict:
        """Bag-of-words at every budget (L2 picked on validation) and the majority class."""
        out = {}
        for name, rows in self.subsets.items():
            train = ([self.texts["train"][i] for i in rows], self.labels["train"][rows])
            bow = BagOfWords.tuned(train, (self.texts["valid"], self.labels["valid"]), len(self.label_names))
            test = scores(bow.model.predict(self.texts["test"]), self.labels["test"], len(self.label_names))
            majority = majority_class(train[1], len(self.label_names))
            out[name] = {"bow": {"l2": bow.l2, "valid_acc": bow.valid_acc, "test_acc": test["acc"],
                                 "test_macro_f1": test["macro_f1"], "n_train": len(rows)},
                         "majority_class": {"label": self.label_names[majority],
                                            "test_acc": (self.labels["test"] == majority).double().mean().item()}}
        return out


# ---- the table ------------------------------------------------------------------------------------


def fmt(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def header(prober: Prober, first: str) -> list[str]:
    text = next(iter(prober.prepared.values()), None)
    agreement = [f"agreement, {s}" + (f" (n={len(text.agreement[s][1]):,})" if text else "") + ": acc. / balanced"
                 for s in SOURCES]
    frozen = [f"frozen [CLS] / mean, {len(rows):,} labels" for rows in prober.subsets.values()]
    return [first, "masked-token loss (nats)", "masked-token acc.", *agreement, *frozen]


def model_cells(prober: Prober, r: dict) -> list[str]:
    """A model's cells: (a) and (b) where it has an MLM head, "-" otherwise; (c) [CLS] / mean per budget."""
    masked = [fmt(r["masked"]["loss"]), fmt(r["masked"]["acc"])] if "masked" in r else ["-", "-"]
    agreement = [both(r["agreement"][s]) if "agreement" in r else "-" for s in SOURCES]
    frozen = [f"{fmt(r['frozen']['cls'][b]['test_acc'])} / {fmt(r['frozen']['mean'][b]['test_acc'])}"
              for b in prober.subsets]
    return [*masked, *agreement, *frozen]


def baseline_lines(prober: Prober, labels: dict) -> list[list[str]]:
    """Rows for the baselines: n-gram models and the more frequent form (one set per tokenizer),
    then bag-of-words and the majority class."""
    lines = []
    k = len(SOURCES)
    blank_frozen = ["-"] * len(prober.subsets)
    for i, b in enumerate(prober.baselines.values()):
        which = f" (tokenizer {i + 1})" if len(prober.baselines) > 1 else ""
        ng = b["ngram"]
        lines.append([f"unigram, add-one, training split{which}", fmt(ng["unigram"]["loss"]), fmt(ng["unigram"]["acc"]),
                      *["-"] * k, *blank_frozen])
        lines.append([f"bigram on the left neighbour, Witten-Bell, training split{which} "
                      f"(backs off to the unigram on {ng['bigram']['backoff']:.0%} of targets)",
                      fmt(ng["bigram"]["loss"]), fmt(ng["bigram"]["acc"]), *["-"] * k, *blank_frozen])
        lines.append([f"the form more frequent in the training split{which}", "-", "-",
                      *[both(b["agreement"][s]) for s in SOURCES], *blank_frozen])
    lines.append(["bag-of-words logistic regression", "-", "-", *["-"] * k,
                  *[fmt(labels[b]["bow"]["test_acc"]) for b in prober.subsets]])
    lines.append(["majority class", "-", "-", *["-"] * k,
                  *[fmt(labels[b]["majority_class"]["test_acc"]) for b in prober.subsets]])
    return lines


def pair_table(labelled: list[tuple[str, dict]]) -> str:
    """Agreement by pair: each (label, agreement results) row's accuracy on each source's pairs."""
    cols = [(s, p, v["n"]) for s in SOURCES for p, v in labelled[0][1][s]["by_pair"].items()]
    return table(["", *[f"{s}: {p} (n={n})" for s, p, n in cols]],
                 [[label, *[both(a[s]["by_pair"].get(p)) for s, p, _ in cols]] for label, a in labelled])


def both(a: dict | None) -> str:
    """'accuracy / balanced accuracy' of agreement results."""
    return "-" if a is None else f"{fmt(a['acc'])} / {fmt(a['balanced'])}"


def agreement_rows(rows: list[dict], prober: Prober, label) -> list[tuple[str, dict]]:
    """(label, agreement results) of every probed model with an MLM head, then of the more frequent form."""
    many = len(prober.baselines) > 1
    return ([(label(r), r["agreement"]) for r in rows if "agreement" in r]
            + [(f"the more frequent form{f' (tokenizer {i + 1})' if many else ''}", b["agreement"])
               for i, b in enumerate(prober.baselines.values())])


def describe(args, prober: Prober) -> list[str]:
    return [
        f"`{args.command}` on {time.strftime('%Y-%m-%d')}; torch {torch.__version__}, {args.device}, "
        f"{torch.get_num_threads()} CPU thread(s).", "",
        f"(a) The `{args.corpus}` validation split in blocks of {args.seq_len} tokens, masked as train_mlm.py masks "
        f"it (--mask-prob {args.mask_prob}, its fixed seed): the model's loss is the valid_loss train_mlm.py prints. "
        "Unigram: add-one smoothed over the ordinary tokens; bigram: conditioned on the token left of the target as "
        "the model sees it, Witten-Bell interpolated with that unigram, backing off to it when the neighbour is "
        "[CLS], [SEP] or [MASK] or was never seen on the left in training; both counted on the training split.",
        f"(b) Each whole-word is/are, was/were, has/have, does/do in the validation split and in the labelled test "
        f"sentences, masked alone in its text (cut to {args.seq_len} positions around it): right when the model's "
        "logit for the original form beats its partner's. Accuracy / balanced accuracy (the mean over the forms of "
        "the accuracy on each form's items: 0.5 for any answer that ignores the context).",
        f"(c) Logistic regression on the frozen final hidden states ([CLS]; mean over the real tokens), standardised "
        f"on the training rows, L-BFGS to convergence (at most {PROBE_MAX_ITER} iterations), L2 picked on validation "
        f"from {list(PROBE_L2_GRID)}, the test split scored once; "
        f"label budgets are nested seeded subsets of the {len(prober.labels['train']):,} training sentences. "
        f"Bag-of-words: the same regression on 0/1 word features, as finetune.py fits it (at most {BOW_MAX_ITER} "
        f"iterations, L2 picked on validation from {list(L2_GRID)}). Test accuracy.",
    ]


def write(out: str, results: dict, text: str, png: bytes | None = None) -> None:
    """results.json, report.md (and the plot) into --out, a probes run folder (claimed here,
    checked before the probes ran), through files.write_file: never through a link."""
    lock = claim_run_folder(out, "probes", resume=True)
    files = {"report.md": text.encode("utf-8"), PLOT: png}
    try:
        write_json(os.path.join(out, "results.json"), results)
        for name, data in files.items():
            if data is not None:
                write_file(os.path.join(out, name), data)
            elif os.path.lexists(os.path.join(out, name)):  # an earlier --run's plot, not of these numbers
                os.remove(os.path.join(out, name))
    except OSError as e:
        die(f"cannot write {e.filename or out} ({e.strerror}); {write_advice(e, 'run again, or choose another --out')}")
    lock.close()


def keep_summary(folder: str, numbers: dict) -> None:
    """--summary's numbers as SUMMARY_FILE in `folder` when it is a train_mlm.py run folder (beside
    its metrics.jsonl, for plot_metrics.py); a checkpoint folder is left as it is."""
    if run_kind(folder) != "pretraining":
        return
    holder = lock_holder(folder)
    if holder is not None:  # train_mlm.py is writing that run: nothing goes into it meanwhile
        print(f"note: {folder} is in use by another process (pid {holder}); its {SUMMARY_FILE} is left as it is",
              file=sys.stderr)
        return
    path = os.path.join(folder, SUMMARY_FILE)
    try:
        write_json(path, numbers)
    except OSError as e:
        die(f"cannot write {path} ({e.strerror}); {write_advice(e, 'run again')}")


# ---- the modes ----------------------------------------------------------------------------------


def checkpoint_mode(args, prober: Prober) -> dict:
    models = [open_spec(spec, args.seeds) for spec in with_twins(args.checkpoint)]  # each checked before any probe
    rows = [prober.probe(model) for model in models]
    labels = prober.label_baselines()
    lines = [[r["name"], *model_cells(prober, r)] for r in rows] + baseline_lines(prober, labels)
    pairs = agreement_rows(rows, prober, lambda r: r["name"])
    text = "\n".join([f"# probes: {', '.join(args.checkpoint)}", "", *describe(args, prober), "",
                      table(header(prober, "model"), lines),
                      *(["", "Agreement by pair, accuracy / balanced accuracy:", "", pair_table(pairs)] if pairs else [])])
    text += "\n"
    results = {"meta": meta(args), "models": rows, "baselines": list(prober.baselines.values()), "labels": labels}
    write(args.out, results, text)
    print(text)
    return results


def run_mode(args, prober: Prober) -> dict:
    found = args.found
    rows = []
    twin = prober.probe(open_spec(f"random:{found[-1]}", args.seeds))
    rows.append({**twin, "step": 0})
    for path in found:
        rows.append({**prober.probe(open_spec(path, args.seeds)), "step": int(os.path.basename(path).split("-")[1])})
    labels = prober.label_baselines()
    lines = [[f"{r['step']:,}" + (" (random init)" if r["step"] == 0 else ""), *model_cells(prober, r)] for r in rows]
    lines += baseline_lines(prober, labels)
    png = plot_run(rows, prober, labels, args.run)
    text = "\n".join([f"# probes along the run {args.run}", "", *describe(args, prober), "",
                      f"Step 0 is a random init of the run's config and tokenizer (seed {args.seeds[found[-1]]}).", "",
                      table(header(prober, "step"), lines), "", "Agreement by pair, accuracy / balanced accuracy:", "",
                      pair_table(agreement_rows(rows, prober, lambda r: f"step {r['step']:,}"))]
                     + (["", f"![probes against the step]({PLOT})"] if png else [])) + "\n"
    results = {"meta": meta(args), "steps": rows, "baselines": list(prober.baselines.values()), "labels": labels}
    write(args.out, results, text, png)
    print(text)
    print(f"plot: {os.path.join(args.out, PLOT)}" if png else f"no plot: {NO_MATPLOTLIB}")
    return results


def plot_run(rows: list[dict], prober: Prober, labels: dict, run: str) -> bytes | None:
    """The three probes against the step, as PNG bytes (None without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return None
    steps = [r["step"] for r in rows]
    base = next(iter(prober.baselines.values()))
    fig, axes = plt.subplots(1, 3, figsize=(15, 6))
    ax = axes[0]
    ax.plot(steps, [r["masked"]["loss"] for r in rows], marker="o", label="model (step 0: random init)")
    for name, style in (("unigram", ":"), ("bigram", "--")):
        ax.axhline(base["ngram"][name]["loss"], color="gray", linestyle=style, label=f"{name} (training split)")
    ax.set_ylabel("masked-token cross-entropy (nats)")
    ax.set_title("(a) masked-token loss, validation split", fontsize=9)
    ax = axes[1]
    for k, source in enumerate(SOURCES):
        if not base["agreement"][source]["n"]:  # no agreement item of this source in the text: no curve
            continue
        ax.plot(steps, [r["agreement"][source]["acc"] for r in rows], marker="o", color=f"C{k}",
                label=f"model, {source} (n={base['agreement'][source]['n']:,})")
        ax.plot(steps, [r["agreement"][source]["balanced"] for r in rows], marker="x", linestyle="--", color=f"C{k}",
                label=f"model, balanced, {source}")
        ax.axhline(base["agreement"][source]["acc"], color=f"C{k}", linestyle=":", label=f"more frequent form, {source}")
    ax.axhline(0.5, color="gray", linestyle=":", label="balanced accuracy of any context-free answer")
    ax.set_ylabel("accuracy (balanced: mean over the forms)")
    ax.set_title("(b) agreement: is/are, was/were, has/have, does/do", fontsize=9)
    ax = axes[2]
    for k, (b, rows_b) in enumerate(prober.subsets.items()):  # one colour per label budget
        for pooling, marker, style in (("cls", "s", "--"), ("mean", "o", "-")):
            ax.plot(steps, [r["frozen"][pooling][b]["test_acc"] for r in rows], marker=marker, linestyle=style,
                    color=f"C{k}", label=f"{'[CLS]' if pooling == 'cls' else 'mean'}, {len(rows_b):,} labels")
        ax.axhline(labels[b]["bow"]["test_acc"], color=f"C{k}", linestyle=":",
                   label=f"bag-of-words, {len(rows_b):,} labels")
    ax.set_ylabel("sentiment test accuracy")
    ax.set_title("(c) logistic regression on frozen features", fontsize=9)
    for ax in axes:
        ax.set_xlabel("pretraining step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13))  # below, off the curves
    fig.suptitle(f"probes along {run}", fontsize=10)
    fig.tight_layout()
    return figure_bytes(fig, dpi=110)


def meta(args) -> dict:
    return {"command": args.command, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "corpus": args.corpus, "seq_len": args.seq_len,
            "mask_prob": args.mask_prob, "twin_seeds": args.seeds, "budgets": [budget_name(b) for b in args.budgets]}


# ---- the run's own flags --------------------------------------------------------------------------

DEFAULTS = {"corpus": "en", "seq_len": 128, "mask_prob": 0.3, "seed": 0}  # train_mlm.py's, where none is saved
SHARED = ("corpus", "seq_len", "mask_prob")  # one masked text serves every model probed, so every run must agree
AT_LEAST_5 = (lambda v: v >= 5, "at least 5 ([CLS] a [SEP] b [SEP])")


def probed_checkpoints(args) -> list[str]:
    """The minibert checkpoint folders this invocation probes (a run's newest stands for all of
    its checkpoints: a resume never changes the flags the probes take); one line for a --run
    without checkpoints or a --summary that is no checkpoint."""
    if args.run:
        # listed once (a run still training saves more while it is probed), and each held at once: the run
        # cannot prune one before it is probed; one it pruned before its hold is no longer the run's
        args.found = [path for path in checkpoints(args.run) if read_held(path, pinned=True)]
        if not args.found:
            die(f"--run {args.run}: no checkpoints/step-NNNNNN folder in it; give a train_mlm.py run folder")
        return [args.found[-1]]
    if args.summary:
        path = resolve_checkpoint(args.summary)
        if not os.path.lexists(os.path.join(path, "config.json")):
            die(f"--summary {args.summary}: not a checkpoint or run folder")
        return [path]
    folders = [spec.removeprefix("random:") for spec in args.checkpoint]
    for folder in folders:  # every one checked before the first is probed
        if folder != "minilm" and not os.path.lexists(os.path.join(resolve_checkpoint(folder), "config.json")):
            die(f"--checkpoint {folder}: no checkpoint there (no config.json); give `minilm`, a checkpoint or a "
                "train_mlm.py run folder")
    return list(dict.fromkeys(resolve_checkpoint(f) for f in folders if f != "minilm"))


def settle_flags(args, folders: list[str]) -> None:
    """Set args.corpus, seq_len and mask_prob, and args.seeds (each folder's twin seed), from the
    flags the runs of `folders` saved (the module docstring says the rule); one line where a flag
    given differs from a run's, or the runs differ in what the probed text shares."""
    saved = {}
    for folder in folders:
        try:
            saved[folder] = run_flags(folder)
        except CheckpointError as e:
            die(said_for_its_run(folder, e))
    for folder, flags in saved.items():
        for key, value in (flags or {}).items():
            given = getattr(args, key)
            if given is not None and given != value:
                die(f"--{key.replace('_', '-')} {given}: {folder} was trained with {value} (its training_state.pt); "
                    "leave the flag out to probe it as it was trained")
    runs = [flags for flags in saved.values() if flags]
    for key in SHARED:
        values = sorted({flags[key] for flags in runs})
        if len(values) > 1:
            die(f"the checkpoints were trained with different --{key.replace('_', '-')} "
                f"({', '.join(map(str, values))}); probe them one at a time")
        if getattr(args, key) is None:
            setattr(args, key, values[0] if values else DEFAULTS[key])
    fallback = DEFAULTS["seed"] if args.seed is None else args.seed
    args.seeds = {folder: flags["seed"] if flags else fallback for folder, flags in saved.items()}


def check_window(args, folders: list[str]) -> None:
    """One line if --seq-len (as settled) is longer than a probed model reads; before any data is
    prepared."""
    minilm = [fetch_minilm()] if args.checkpoint and "minilm" in args.checkpoint else []
    for folder in folders + minilm:
        try:
            positions = read_config(folder)[0].max_position_embeddings
        except (CheckpointError, FileNotFoundError):  # no checkpoint to read: loading it says so, in its place
            continue
        if args.seq_len > positions:
            die(f"--seq-len {args.seq_len}: {folder} reads at most {positions} positions; give at most {positions}")


def main(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--checkpoint", nargs="+", metavar="SPEC",
                      help="checkpoint or run folders, random:FOLDER, minilm; each folder gets its random twin")
    mode.add_argument("--run", metavar="FOLDER", help="a train_mlm.py run folder: probe every checkpoint of it")
    mode.add_argument("--summary", metavar="FOLDER",
                      help="print one line for a checkpoint (or run folder's newest; a run folder also gets "
                           f"{SUMMARY_FILE}, for plot_metrics.py)")
    p.add_argument("--out", help="output folder of --checkpoint and --run (default: runs/probes); --summary "
                                 "writes none")
    p.add_argument("--corpus", default=None, choices=["en", "en-large", "zh"],
                   help="the pretraining corpus whose validation split is probed, its labelled set for (c) "
                        "(default: the run's own; en for a checkpoint without training_state.pt)")
    p.add_argument("--data-root", default=None, help="where prepared corpora are cached (default: data/cache)")
    p.add_argument("--budgets", default="1000,all",
                   help="(c): comma-separated numbers of labelled training sentences, `all` for all (default: "
                        "1000,all); --summary uses the first")
    p.add_argument("--seq-len", type=int, default=None,
                   help="train_mlm.py's --seq-len: block and window length (default: the run's own; 128 without one)")
    p.add_argument("--mask-prob", type=float, default=None,
                   help="train_mlm.py's --mask-prob (default: the run's own; 0.3 without one)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the random-init twins (default: the run's own --seed; 0 without one)")
    add_device(p, default="cpu")
    args = p.parse_args(argv)
    args.command = "python probe.py " + " ".join(argv if argv is not None else sys.argv[1:])
    check_ranges(p, args, {"seq_len": AT_LEAST_5, "mask_prob": PROBABILITY, "seed": SEED})
    given = args.budgets
    try:
        args.budgets = tuple(None if b.strip() == "all" else int(b) for b in given.split(","))
    except ValueError:
        p.error(f"--budgets {given}: give numbers or `all`, comma-separated")
    if len(set(args.budgets)) < len(args.budgets) or any(b is not None and b < 2 for b in args.budgets):
        p.error(f"--budgets {given}: each at least 2, none named twice")
    if args.summary and args.out is not None:
        p.error("--out: --summary prints one line (and keeps its numbers in a run folder it is given); it writes no "
                "--out folder")
    if not args.summary:
        args.out = args.out or "runs/probes"
        check_run_folder(args.out, "probes", resume=True)  # before any probe runs
    args.device = pick_device(args.device)
    root = args.data_root or CACHE
    try:
        folders = probed_checkpoints(args)
        settle_flags(args, folders)
        check_window(args, folders)
        args.corpus_folder = prepare(args.corpus, root=root)
        args.labelled_folder = labelled_folder("zh" if args.corpus == "zh" else "en", root=root)
        if args.summary:
            (path,) = folders
            try:
                numbers = summary(path, args.corpus_folder, args.labelled_folder, args.budgets[0], args.seeds[path],
                                  args.seq_len, args.mask_prob, args.device)
            except CheckpointError as e:
                die(said_for_its_run(path, e))
            line = summary_line(numbers)
            print(line)
            keep_summary(args.summary, numbers)
            return line
        texts, labels, names = labelled_splits(args.labelled_folder)
        if any(b is not None and b > len(labels["train"]) for b in args.budgets):
            p.error(f"--budgets: the training split holds {len(labels['train']):,} sentences; use `all` for all of them")
        prober = Prober(args, texts, labels, names)
        return checkpoint_mode(args, prober) if args.checkpoint else run_mode(args, prober)
    except (DataError, InputError, CheckpointError) as e:
        die(str(e))
    except OSError as e:  # preparing the data: a --data-root that is a file or under one, a full disk, ...
        die(f"the data cache {os_problem(e, root)}")


if __name__ == "__main__":
    run_script(main, "nothing is half-written; run the same command again")
