"""Fine-tune a BERT for sentence classification from its [CLS] position, then label new text.

    python finetune.py --checkpoint runs/mlm-en --overwrite                    # make run's runs/cls-en, redone
    python finetune.py --checkpoint runs/mlm-en --data data/examples/topics.csv --out runs/cls-topics
                                                                               # one labelled file, split here
    echo "a gripping, funny film" | python finetune.py predict --model runs/cls-en   # label new text
    python data/prepare.py --minilm                                            # fetch MiniLM, then:
    python finetune.py --checkpoint data/cache/minilm --lr 1e-4 --out runs/cls-minilm   # a real BERT
    python finetune.py --checkpoint data/cache/minilm --freeze-encoder --out runs/cls-frozen   # head only (S17)
    python finetune.py --checkpoint data/cache/minilm --lora-rank 8 --out runs/cls-lora        # LoRA on query/value

--checkpoint is any minibert or HuggingFace BERT folder (config.json, model.safetensors or
pytorch_model.bin, tokenizer.json). --data en (movie-review sentiment, the default), zh
(Chinese reviews), a folder with train / valid / test files in .tsv, .csv or .jsonl (columns
text and label), or one such file, split here by label (seeded; --valid-fraction and
--test-fraction of each label held out). The model trains on the training split; the validation split
picks the best epoch and stops training early (S19); the test split is read and scored once,
at the end, with the best checkpoint. --head cls (default) is the exercise's [CLS] + Linear
head (S6), saved in minibert's layout; --head pooler is HF's BertForSequenceClassification and
saves a checkpoint `transformers` loads. The default recipe (minibert.run.finetuning.Recipe:
head, rate, epochs, patience; more epochs on a small set, to reach 100 updates) was picked on
validation for `make run`'s checkpoint and a 300-row set of three topics, and the
pretraining study fine-tunes with the same loop and recipe (experiments/compare.py).
`python finetune.py train --help` lists every flag.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch

from data.prepare import DataError, labelled_folder
from minibert import BertForSequenceClassification, CheckpointError, load_tokenizer
from minibert.checkpoint import NOT_FINITE, overflowing, read_config
from minibert.lora import DEFAULT_TARGETS, lora_targets
from minibert.model import BertModel, load_model
from minibert.run import (die, first_line, input_lines, interrupted, interrupts_held, interrupts_ignored,
                          run_script, write_advice)
from minibert.files import append_line
from minibert.run.baselines import MAX_WEIGHTS, BagOfWords, majority_class, num_weights
from minibert.run.classification import (HEADS, build_classifier, evaluate, export, has_pooler, logits_of,
                                         recover_best, set_trainable)
from minibert.run.folders import (check_claimed, check_run_folder, claim_run_folder, lock_holder, no_checkpoint_folder,
                                  resolve_checkpoint, run_kind, said_for_its_run, write_json)
from minibert.run.finetuning import MIN_STEPS, BestEpoch, Epoch, Recipe, default_epochs, fine_tune
from minibert.run.flags import (AT_LEAST_0, AT_LEAST_1, BATCH_SIZE, FRACTION, HELD_OUT_SHARE, POSITIVE, SEED, Parser,
                                add_device, check_ranges)
from minibert.run.labelled import (InputError, batch_of, batches, check_known_labels, check_label_spellings, encode,
                                   read_split, scores, seen_in_training, split_files, split_rows, token_ids)
from minibert.run.training import pick_device, use_tf32
from minibert.text import one_line, shows_nothing

RECIPE = Recipe()  # make run's recipe, picked on validation (minibert.run.finetuning.Recipe)
DEFAULT_LR = {"full": RECIPE.lr, "frozen": 1e-3, "lora": 1e-3}


def checked_max_length(max_length: int | None, config) -> int:
    """--max-length as given (refused above the model's positions), or 128 capped to them."""
    if max_length is None:
        return min(128, config.max_position_embeddings)
    if max_length > config.max_position_embeddings:
        die(f"--max-length {max_length} exceeds the model's max_position_embeddings ({config.max_position_embeddings})")
    return max_length


# ---- fine-tuning, step by step -------------------------------------------------------------


@dataclass
class Labelled:
    """The labelled splits as read (every row checked up front) and as the model reads them."""

    files: dict[str, str]                  # split -> file
    rows: dict[str, list[tuple[str, str]]]  # split -> (text, label) rows
    labels: list[str]                      # the training split's labels, sorted: label id = index
    encoded: dict[str, dict] = field(default_factory=dict)  # split -> {"ids", "labels"} (labelled.encode)

    def texts(self, split: str) -> list[str]:
        return [t for t, _ in self.rows[split]]


def lora_modules(args) -> tuple[str, ...]:
    """--lora-modules as the names LoRA looks for (the ends of Linear modules' names)."""
    return tuple(m.strip() for m in args.lora_modules.split(",") if m.strip())


HELD_OUT = 0.1  # the share of each label's rows one --data file gives to validation, and to test


def held_out_shares(args) -> tuple[float, float]:
    """--valid-fraction and --test-fraction, each HELD_OUT where not given."""
    return tuple(f if f is not None else HELD_OUT for f in (args.valid_fraction, args.test_fraction))


def read_labelled(args) -> tuple[Labelled, object]:
    """The splits of --data (a folder's three files, or one file split here) and the tokenizer of
    --checkpoint, or one line saying what is wrong. A label written two ways is refused before one
    file is split, whose counts it would otherwise fail first."""
    has_splits = args.data in ("en", "zh") or os.path.isdir(args.data)  # else labelled_folder says it is missing
    try:
        if os.path.isfile(args.data):
            if not args.data.endswith((".csv", ".tsv", ".jsonl")):
                die(f"--data {args.data}: give a .csv, .tsv or .jsonl file (columns text and label), or a folder")
            files = dict.fromkeys(("train", "valid", "test"), args.data)
            every_row = read_split(args.data)
            check_label_spellings([y for _, y in every_row], f"--data {args.data}")
            rows = split_rows(every_row, *held_out_shares(args), args.data)
        elif has_splits and (args.valid_fraction is not None or args.test_fraction is not None):
            given = "--valid-fraction" if args.valid_fraction is not None else "--test-fraction"
            die(f"{given} splits one --data file; --data {args.data} is a set with its own train, valid and test "
                "splits: leave it out, or give one file")
        else:
            files = split_files(labelled_folder(args.data))
            rows = {split: read_split(files[split]) for split in ("train", "valid", "test")}
            check_label_spellings([y for split in rows.values() for _, y in split], f"--data {args.data}")
        tokenizer = load_tokenizer(args.checkpoint)
    except (InputError, DataError, CheckpointError, FileNotFoundError) as e:
        die(said_for_its_run(args.checkpoint, e))
    labels = sorted({y for _, y in rows["train"]})
    if len(labels) < 2:
        die(f"{files['train']} has a single label {labels}; classification needs at least two")
    try:  # before the model is loaded: its info lines would come before this error
        for split in ("valid", "test"):
            check_known_labels(rows[split], labels, files[split])
    except InputError as e:
        die(str(e))
    return Labelled(files, rows, labels), tokenizer


def build_model(args, data: Labelled, tokenizer) -> tuple[torch.nn.Module, int]:
    """The classifier on --checkpoint's encoder, the tokenizer checked against it, and the
    splits encoded (--max-length checked against the model). Returns (model, pad id). What needs
    only config.json is checked first: loading the model prints a line, which would come before."""
    try:
        with warnings.catch_warnings():  # said once, when the model loads
            warnings.simplefilter("ignore")
            config = read_config(args.checkpoint)[0]
    except (CheckpointError, FileNotFoundError) as e:
        die(f"cannot load --checkpoint {args.checkpoint}: {said_for_its_run(args.checkpoint, e)}")
    vocab, pad_id = tokenizer.get_vocab_size(), tokenizer.token_to_id("[PAD]")
    if vocab > config.vocab_size or pad_id not in (None, config.pad_token_id):
        die(f"the tokenizer in {args.checkpoint} ({vocab} tokens, [PAD] = {pad_id}) does not belong to its model "
            f"({config.vocab_size} tokens, pad_token_id {config.pad_token_id})")
    args.max_length = checked_max_length(args.max_length, config)
    if args.lora_rank:  # asked of the encoder's skeleton (sizes, no weights): before the load prints a line
        with torch.device("meta"):
            skeleton = BertModel(config, add_pooling_layer=args.head == "pooler")
        try:
            targets = lora_targets(skeleton, lora_modules(args))
        except ValueError as e:
            die(f"--lora-modules {args.lora_modules}: {e}")
        width = min(min(skeleton.get_submodule(n).in_features, skeleton.get_submodule(n).out_features) for n in targets)
        if args.lora_rank > width:  # a rank above a layer's narrower side adds nothing but memory
            die(f"--lora-rank {args.lora_rank} is above the width of the layers it adapts ({width}), where an "
                f"adapter is no longer of low rank: give at most {width}")
    label_ids = {y: i for i, y in enumerate(data.labels)}
    try:
        data.encoded = {s: encode(tokenizer, data.rows[s], label_ids, args.max_length, data.files[s])
                        for s in ("train", "valid", "test")}
    except InputError as e:
        die(str(e))
    try:
        model = build_classifier(args.checkpoint, args.head, len(data.labels), dict(enumerate(data.labels)),
                                 args.dropout)
    except (CheckpointError, FileNotFoundError, ValueError) as e:
        die(f"cannot load --checkpoint {args.checkpoint}: {said_for_its_run(args.checkpoint, e)}")
    return model, config.pad_token_id if pad_id is None else pad_id


@dataclass
class Plan:
    """What trains and how: the method, its learning rate, the modules LoRA wrapped, the counts."""

    method: str
    lr: float
    lora_modules: list[str]
    trainable_params: int
    total_params: int

    def describe(self, args) -> str:
        lora = f", LoRA rank {args.lora_rank} on {len(self.lora_modules)} modules" if args.lora_rank else ""
        return (f"fine-tuning ({self.method}{lora}, {args.head} head) {args.checkpoint}: {self.trainable_params:,} "
                f"of {self.total_params:,} parameters trainable")


def fit(args, model, data: Labelled, tokenizer, pad_id: int, plan: Plan, device) -> int:
    """The fine-tuning loop (minibert.run.finetuning, the studies' too); after each epoch,
    validation, one line in metrics.jsonl, and best/ exported when the accuracy improved; stop
    early after --patience epochs without. Returns the best epoch."""
    train, valid, n_labels = data.encoded["train"], data.encoded["valid"], len(data.labels)
    epochs = args.epochs or default_epochs(len(train["labels"]), args.batch_size)
    recipe = Recipe(args.head, plan.lr, epochs, args.patience, args.batch_size, args.max_steps,
                    args.weight_decay, args.fused_adamw, args.seed)
    print(f"{plan.describe(args)}; {len(train['labels']):,} training / {len(valid['labels']):,} "
          f"validation examples, {n_labels} labels; lr {plan.lr}, {epochs} epochs at most")
    best, t0 = BestEpoch(args.patience), time.time()

    def on_epoch_end(e: Epoch) -> bool:
        v = evaluate(model, valid, args.batch_size * 2, pad_id, device, n_labels)
        record = {"epoch": e.epoch, "step": e.step, "train_loss": e.train_loss, "valid_loss": v["loss"],
                  "valid_acc": v["acc"], "valid_macro_f1": v["macro_f1"], "lr": e.lr,
                  "trainable_params": plan.trainable_params, "total_params": plan.total_params,
                  "elapsed_s": time.time() - t0}
        append_metrics(os.path.join(args.out, "metrics.jsonl"), record)
        print(f"epoch {e.epoch}: train loss {e.train_loss:.4f}, validation loss {v['loss']:.4f}, accuracy "
              f"{v['acc']:.4f}, macro-F1 {v['macro_f1']:.4f}, lr {e.lr:.2e}, trainable {plan.trainable_params:,}")
        if best.improved(e.epoch, v["acc"]):
            export_best(model, os.path.join(args.out, "best"), tokenizer)
        elif best.stop and e.epoch < epochs:
            print(f"early stop: no better validation accuracy for {args.patience} epoch(s)")
            return True
        return False

    def logits(rows: torch.Tensor) -> torch.Tensor:
        return logits_of(model, {k: v.to(device) for k, v in batch_of(train, rows, pad_id).items()})  # (B, K)

    def starting_weights_overflow(rows: torch.Tensor, step: int) -> None:
        """A loss that is not finite after updates: the checkpoint's own encoder on the same rows
        tells an overflow of its weights (which no learning rate mends) from a diverging run."""
        batch = batch_of(train, rows, pad_id)
        with torch.no_grad():
            out = BertModel.from_pretrained(args.checkpoint).eval()(batch["input_ids"], batch["attention_mask"])
        if overflowing(out.last_hidden_state) or (out.pooler_output is not None and overflowing(out.pooler_output)):
            die(f"--checkpoint {args.checkpoint}: the model {NOT_FINITE} (on the texts of step {step})")

    fine_tune(model, logits, train["labels"], recipe, on_epoch_end, progress=not args.no_progress,
              on_not_finite=starting_weights_overflow)
    return best.epoch


AGAIN = "run again with --overwrite, or choose another --out"  # after a failed write


def export_best(model, path: str, tokenizer) -> None:
    try:
        check_claimed(os.path.dirname(path))
        export(model, path, tokenizer)
    except OSError as e:
        die(f"cannot write {path} ({e.strerror}); {write_advice(e, AGAIN)}")


def append_metrics(path: str, record: dict) -> None:
    try:
        check_claimed(os.path.dirname(path))
        append_line(path, json.dumps(record))
    except OSError as e:
        die(f"cannot append to {path} ({e.strerror}); {write_advice(e, AGAIN)}")


def write_summary(path: str, summary: dict) -> None:
    try:
        check_claimed(os.path.dirname(path))
        write_json(path, summary)
    except OSError as e:
        die(f"cannot write {path} ({e.strerror}); {write_advice(e, AGAIN)}")


def score(args, data: Labelled, pad_id: int, device, plan: Plan, best_epoch: int, t0: float) -> dict:
    """The best checkpoint scored once on validation and test, beside the majority class, on
    the same splits."""
    best_path, n_labels = os.path.join(args.out, "best"), len(data.labels)
    final = HEADS[args.head].from_pretrained(best_path).to(device)
    valid = evaluate(final, data.encoded["valid"], args.batch_size * 2, pad_id, device, n_labels)
    test = evaluate(final, data.encoded["test"], args.batch_size * 2, pad_id, device, n_labels)
    train_s = time.time() - t0
    y = {s: data.encoded[s]["labels"] for s in ("train", "valid", "test")}
    majority = majority_class(y["train"], n_labels)
    return {"method": plan.method, "head": args.head, "checkpoint": args.checkpoint, "best_epoch": best_epoch,
            "valid_acc": valid["acc"], "valid_macro_f1": valid["macro_f1"], "test_acc": test["acc"],
            "test_macro_f1": test["macro_f1"], "majority_label": data.labels[majority],
            "majority_valid_acc": (y["valid"] == majority).float().mean().item(),
            "majority_test_acc": (y["test"] == majority).float().mean().item(),
            "trainable_params": plan.trainable_params,
            "total_params": plan.total_params, "train_s": train_s, "model": best_path}


def bag_of_words(data: Labelled) -> dict:
    """Bag-of-words (its penalty picked on validation) on the same splits; skipped with a note
    when its weights would be too many (MAX_WEIGHTS) or do not fit in memory."""
    y = {s: data.encoded[s]["labels"] for s in ("train", "valid", "test")}
    n_labels, size = len(data.labels), num_weights(data.texts("train"), len(data.labels))
    skipped = {"bow_l2": None, "bow_valid_acc": None, "bow_test_acc": None, "bow_test_macro_f1": None}
    if size > MAX_WEIGHTS:
        print(f"note: bag-of-words skipped: {size:,} weights (words x {n_labels} labels), more than {MAX_WEIGHTS:,}",
              file=sys.stderr)
        return skipped
    try:
        bow = BagOfWords.tuned((data.texts("train"), y["train"]), (data.texts("valid"), y["valid"]), n_labels)
    except (RuntimeError, MemoryError) as e:
        print(f"note: bag-of-words skipped: {first_line(e)}", file=sys.stderr)
        return skipped
    test = scores(bow.model.predict(data.texts("test")), y["test"], n_labels)
    return {"bow_l2": bow.l2, "bow_valid_acc": bow.valid_acc, "bow_test_acc": test["acc"],
            "bow_test_macro_f1": test["macro_f1"]}


def report(summary: dict) -> None:
    s = summary
    print(f"best epoch {s['best_epoch']}, saved to {s['model']}")
    print(f"validation accuracy {s['valid_acc']:.4f} (macro-F1 {s['valid_macro_f1']:.4f}); test accuracy "
          f"{s['test_acc']:.4f} (macro-F1 {s['test_macro_f1']:.4f})")
    print(f"baselines on the same splits: majority class {s['majority_label']!r}: validation "
          f"{s['majority_valid_acc']:.4f}, test {s['majority_test_acc']:.4f}; " + (
              "bag-of-words skipped" if s["bow_l2"] is None else
              f"bag-of-words (L2 {s['bow_l2']:g}, picked on validation): validation {s['bow_valid_acc']:.4f}, "
              f"test {s['bow_test_acc']:.4f} (macro-F1 {s['bow_test_macro_f1']:.4f})"))
    if s["bow_l2"] is not None and s["valid_acc"] < s["bow_valid_acc"]:
        print(f"the fine-tuned model is below bag-of-words on validation ({s['valid_acc']:.4f} < "
              f"{s['bow_valid_acc']:.4f}): try more epochs (--epochs), another rate (--lr), or a larger pretrained "
              "model (--checkpoint)")


@torch.no_grad()
def check_every_token(args, model, data: Labelled, pad_id: int) -> None:
    """Finite weights too large for float32 (an embedding row of 3e38) give NaN only on the texts
    that hold their token: said before --out is claimed, not as a NaN validation or test score. The
    first training batch is read, then every token id of the three splits once, in full rows as
    long as the longest text (so every position the texts use is read too)."""
    ids = [row for s in ("train", "valid", "test") for row in data.encoded[s]["ids"]]
    used, longest = sorted({i for row in ids for i in row}), max(len(row) for row in ids)
    n_rows = -(-len(used) // longest)  # every id once, every row full
    cycle = (used * (n_rows * longest // len(used) + 1))[:n_rows * longest]
    rows = {"ids": [cycle[i:i + longest] for i in range(0, len(cycle), longest)]}
    first, _ = next(batches(data.encoded["train"], args.batch_size, pad_id))
    for batch in [first, *(batch_of(rows, r, pad_id) for r in torch.arange(n_rows).split(args.batch_size))]:
        hidden = model.eval().base_model(batch["input_ids"], batch["attention_mask"]).last_hidden_state  # (B, T, C)
        if overflowing(hidden) or not bool(torch.isfinite(logits_of(model, batch)).all()):
            die(f"--checkpoint {args.checkpoint}: the model {NOT_FINITE}")


def train(args):
    """Checks first (the run folder, the data, the checkpoint), then --out is claimed; fit, then
    the test split is scored once with the best checkpoint, beside the baselines."""
    torch.manual_seed(args.seed)
    args.checkpoint = resolve_checkpoint(args.checkpoint)
    if not os.path.isdir(args.checkpoint):
        die(f"--checkpoint {args.checkpoint}: {no_checkpoint_folder(args.checkpoint)}; give a checkpoint folder or a train_mlm.py run folder "
            "(`make run` writes runs/mlm-en; `python data/prepare.py --minilm` fetches MiniLM into data/cache/minilm)")
    device = pick_device(args.device)
    use_tf32(device, args.tf32)
    inputs = (args.checkpoint, args.data if os.path.exists(args.data) else "")
    check_run_folder(args.out, "fine-tuning", overwrite=args.overwrite, inputs=inputs)  # before any data is loaded
    data, tokenizer = read_labelled(args)
    model, pad_id = build_model(args, data, tokenizer)
    if os.path.isfile(args.data):  # said once the checkpoint has loaded: a refusal of it is the only line
        print(f"{args.data} split by label (seed 0): {len(data.rows['train']):,} training, "
              f"{len(data.rows['valid']):,} validation, {len(data.rows['test']):,} test rows")
    for split in ("valid", "test"):  # a folder's own splits may share texts (one file is split by text)
        seen = seen_in_training(data.rows["train"], data.rows[split])
        if seen:
            print(f"note: {seen:,} of the {len(data.rows[split]):,} rows of {data.files[split]} have a text the training "
                  "split has too, so its scores overstate what the model does on new text", file=sys.stderr)
    method = "lora" if args.lora_rank else "frozen" if args.freeze_encoder else "full"
    targets = lora_modules(args)
    new_pooler = method == "frozen" and args.head == "pooler" and not has_pooler(args.checkpoint)
    try:
        wrapped = set_trainable(model, method, args.lora_rank, args.lora_alpha, targets, train_pooler=new_pooler)
    except ValueError as e:
        die(f"--lora-modules {args.lora_modules}: {e}")
    check_every_token(args, model, data, pad_id)
    model.train()
    lock = claim_run_folder(args.out, "fine-tuning", overwrite=args.overwrite, inputs=inputs)  # every check done
    if new_pooler:
        print(f"{args.checkpoint} has no pooler: the new one trains with the classifier, the encoder stays frozen")
    model.to(device)
    params = list(model.parameters())
    plan = Plan(method, args.lr if args.lr is not None else DEFAULT_LR[method], wrapped,
                sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params))
    t0 = time.time()
    best_epoch = fit(args, model, data, tokenizer, pad_id, plan, device)
    try:  # every epoch is done: a Ctrl-C now says that best/ is kept, not yet scored
        summary = score(args, data, pad_id, device, plan, best_epoch, t0)
    except KeyboardInterrupt:
        interrupted(f"the best epoch's model is in {os.path.join(args.out, 'best')}, not yet scored (no summary.json); "
                    "run again with --overwrite to fine-tune and score afresh, which replaces it")
    summary_path = os.path.join(args.out, "summary.json")
    try:  # a Ctrl-C from here on says what is kept: the results are safe before the baseline runs
        with interrupts_held():
            write_summary(summary_path, summary)
        summary.update(bag_of_words(data))
    except KeyboardInterrupt:
        interrupted(f"the results are in {summary_path} and the model in {os.path.join(args.out, 'best')}, without "
                    "the bag-of-words baseline (run again with --overwrite to have it too)")
    with interrupts_ignored():  # the run is whole once this is written: a Ctrl-C now changes nothing
        write_summary(summary_path, summary)
        lock.close()
        report(summary)
    return summary


def recover_export(model: str) -> None:
    """A fine-tuning run's best/ that an export killed between its renames left missing is put
    back (recover_best), under the run's lock; any other folder is only read, never changed."""
    run = os.path.dirname(model)
    if os.path.basename(model) != "best" or os.path.isdir(model) or run_kind(run) != "fine-tuning":
        return
    holder = lock_holder(run)
    if holder and not any(os.path.isdir(model + end) for end in (".old", ".tmp")):
        die(f"{run} is still fine-tuning (pid {holder}) and has no best/ model yet; predict once its first epoch "
            "is done")
    lock = claim_run_folder(run, "fine-tuning", resume=True, flag="--model")
    recover_best(model)
    lock.close()


def predict(args):
    texts = input_lines(args.file, "sentence") if args.file else None  # a file that cannot be read: said first
    kind = run_kind(args.model)
    if kind == "fine-tuning":  # a run folder: its best epoch's model
        args.model = os.path.join(args.model, "best")
    elif kind in ("pretraining", "probes"):
        die(f"--model {args.model} is a {kind} run, not a classifier; give a `finetune.py train` run folder")
    recover_export(os.path.normpath(args.model))
    try:
        model = load_model(args.model, default=BertForSequenceClassification).eval()
        tokenizer = load_tokenizer(args.model)
    except (CheckpointError, FileNotFoundError, ValueError) as e:
        die(f"cannot load --model {args.model}: {e}")
    if not isinstance(model, tuple(HEADS.values())):
        die(f"--model {args.model} holds a {type(model).__name__}, not a classifier; give the best/ folder "
            "of a `finetune.py train` run")
    if texts is None:  # standard input, read once the model is known good
        texts = input_lines(None, "sentence")
    if not texts:
        die("no text to label (one sentence per line, from --file or standard input)")
    args.max_length = checked_max_length(args.max_length, model.config)
    data = {"ids": token_ids(tokenizer, texts, args.max_length), "labels": torch.zeros(len(texts), dtype=torch.long)}
    blank = next((n for n, (text, row) in enumerate(zip(texts, data["ids"]), 1)  # [CLS] [SEP] alone, or [UNK]
                  if len(row) <= 2 or shows_nothing(text) is not None), None)      # for a Hangul filler
    if blank is not None:  # as training refuses it: no label is printed for a text that shows nothing
        die(f"{args.file or 'standard input'}: sentence {blank:,} ({ascii(texts[blank - 1])}) holds nothing the "
            "tokenizer reads (only invisible or control characters); remove it")
    id2label, lines = model.config.id2label, []
    hidden = []  # each batch's last hidden state (B, T, C), as the encoder gives it to the head
    model.base_model.register_forward_hook(lambda module, inputs, out: hidden.append(out.last_hidden_state))
    for batch, _ in batches(data, 64, tokenizer.token_to_id("[PAD]") or 0):
        with torch.no_grad():
            probs = logits_of(model, batch).softmax(-1)                        # (B, K)
        if overflowing(hidden.pop()) or not bool(torch.isfinite(probs).all()):  # finite weights too large: said
            die(f"--model {args.model}: the model {NOT_FINITE}")  # before any line, never a NaN printed
        for p in probs:
            k = int(p.argmax())
            lines.append(f"{one_line(id2label[k])}\t{p[k].item():.4f}\t{one_line(texts[len(lines)])}")
    print("\n".join(lines))


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "predict", "-h", "--help"):
        argv.insert(0, "train")
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="fine-tune (the default command)")
    t.add_argument("--checkpoint", required=True,
                   help="a minibert or HuggingFace BERT checkpoint folder, or a train_mlm.py run folder (its newest checkpoint)")
    t.add_argument("--data", default="en",
                   help="en (default), zh, a folder with train/valid/test files, or one .csv/.tsv/.jsonl file that "
                        "is split here (--valid-fraction, --test-fraction)")
    t.add_argument("--valid-fraction", type=float,
                   help="with one --data file: the share of each label's rows held out for validation (default: 0.1)")
    t.add_argument("--test-fraction", type=float,
                   help="with one --data file: the share of each label's rows held out for test (default: 0.1)")
    t.add_argument("--out", default="runs/cls-en", help="output folder (default: runs/cls-en)")
    t.add_argument("--head", choices=sorted(HEADS), default=RECIPE.head,
                   help="cls: the exercise's [CLS] + Linear; pooler: HF's BertForSequenceClassification "
                        f"(default: {RECIPE.head})")
    t.add_argument("--freeze-encoder", action="store_true", help="train the classification head only (S17)")
    t.add_argument("--lora-rank", type=int, default=0, help="LoRA adapters of this rank (0 = off)")
    t.add_argument("--lora-alpha", type=float, default=None,
                   help="LoRA alpha: the update is scaled by alpha / rank (default: the rank, a scaling of 1)")
    t.add_argument("--lora-modules", default=None,
                   help="comma-separated name endings of the Linear layers that get adapters "
                        f"(default: {','.join(DEFAULT_TARGETS)})")
    t.add_argument("--epochs", type=int, default=None,
                   help=f"epochs at most (default: {RECIPE.epochs}, or on a small training split as many as make "
                        f"{MIN_STEPS} updates)")
    t.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = no limit)")
    t.add_argument("--patience", type=int, default=RECIPE.patience, help="epochs without a better validation "
                                                                         f"accuracy before stopping (default: {RECIPE.patience})")
    t.add_argument("--batch-size", type=int, default=RECIPE.batch_size,
                   help=f"examples per step (default: {RECIPE.batch_size})")
    t.add_argument("--lr", type=float, default=None,
                   help=f"peak learning rate (default: {DEFAULT_LR['full']} full, {DEFAULT_LR['frozen']} frozen, "
                        f"{DEFAULT_LR['lora']} LoRA); linear warm-up over 10%% of the steps, then linear decay; "
                        "AdamW betas (0.9, 0.999), eps 1e-8")
    t.add_argument("--weight-decay", type=float, default=RECIPE.weight_decay,
                   help=f"AdamW weight decay on matrices (default: {RECIPE.weight_decay})")
    t.add_argument("--fused-adamw", action=argparse.BooleanOptionalAction, default=True,
                   help="PyTorch's fused AdamW kernel; --no-fused-adamw: the foreach one (default: fused)")
    t.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (default: 0.1)")
    t.add_argument("--max-length", type=int, default=None,
                   help="truncate texts to this many tokens (default: 128, or the model's maximum if smaller)")
    t.add_argument("--seed", type=int, default=0, help="seed of the head's init, data order and dropout (default: 0)")
    add_device(t, tf32=True)
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--overwrite", action="store_true",
                   help="replace the fine-tuning run --out holds: all of it is removed first (never a run of another kind, a folder of other files, nor one holding this run's inputs)")
    q = sub.add_parser("predict", help="label sentences with a fine-tuned model")
    q.add_argument("--model", required=True,
                   help="a `finetune.py train` run folder (its best/ model is read) or a classifier checkpoint folder")
    q.add_argument("--file", help="one sentence per line (default: standard input)")
    q.add_argument("--max-length", type=int, default=None,
                   help="truncate texts to this many tokens (default: 128, or the model's maximum if smaller)")
    args = p.parse_args(argv)
    if args.command == "train":
        if args.lora_rank and args.freeze_encoder:
            p.error("--lora-rank and --freeze-encoder are two different methods; pick one")
        if not args.lora_rank and (args.lora_alpha is not None or args.lora_modules is not None):
            p.error(f"{'--lora-alpha' if args.lora_alpha is not None else '--lora-modules'} shapes LoRA adapters, "
                    "and there are none without --lora-rank: give a rank, or leave it out")
        args.lora_modules = args.lora_modules or ",".join(DEFAULT_TARGETS)
        check_ranges(p, args, {"epochs": AT_LEAST_1, "batch_size": BATCH_SIZE, "patience": AT_LEAST_1,
                               "max_steps": AT_LEAST_0, "lora_rank": AT_LEAST_0, "seed": SEED, "lr": POSITIVE,
                               "weight_decay": AT_LEAST_0, "dropout": FRACTION, "lora_alpha": POSITIVE,
                               "valid_fraction": HELD_OUT_SHARE, "test_fraction": HELD_OUT_SHARE})
        valid, test = held_out_shares(args)
        if valid + test >= 1:  # no row of any label would be left to train on, however many rows there are
            p.error(f"--valid-fraction + --test-fraction must be below 1, to leave each label rows for training "
                    f"(here {valid:g} + {test:g}; each is {HELD_OUT:g} when not given)")
    if args.max_length is not None and args.max_length < 3:
        p.error("--max-length must be at least 3 ([CLS], one token, [SEP])")
    return args


class ToStandardOutput(logging.StreamHandler):
    """The info lines' handler: standard output closed by its reader (`| head`) ends the script
    quietly (run_script), instead of logging's own report of the error on every line."""

    def handleError(self, record):
        if isinstance(sys.exc_info()[1], BrokenPipeError):
            raise sys.exc_info()[1]
        super().handleError(record)


def main(argv=None):
    # minibert's info lines (e.g. a head swapped) are part of the report, on standard output: standard
    # error holds only a refusal, one line, even when it comes after the model has loaded
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[ToStandardOutput(sys.stdout)])
    args = parse_args(argv)
    return train(args) if args.command == "train" else predict(args)


if __name__ == "__main__":
    run_script(main, "nothing was written" if sys.argv[1:2] == ["predict"] else
               "nothing is half-written; run again with --overwrite to fine-tune afresh")
