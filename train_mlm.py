"""Pretrain a small BERT with masked language modelling, on a laptop GPU or a CPU.

    python train_mlm.py                                  # bert-tiny on the English corpus, ~8 min on 2 CPU cores
    python train_mlm.py --corpus zh --out runs/mlm-zh    # the Chinese corpus
    python train_mlm.py --corpus my_text.txt             # your own text, one document per line
    python train_mlm.py --resume                         # continue the run in --out
    torchrun --nproc_per_node=2 train_mlm.py ...         # DistributedDataParallel (gloo on CPU, NCCL on GPU)

Every step draws a global batch of packed blocks (for the first half of the steps, blocks of 16
tokens, eight times as many as of 128: short blocks teach a small model where its neighbours
are much sooner, as BERT itself trained on 128 tokens before 512), masks it with minibert's `mask_batch`
(30% of ordinary tokens by default, BERT's 80/10/10 split) from a seeded generator, and minimises the MLM loss
averaged over all masked tokens of the global batch, whatever the number of processes and
accumulation steps. Checkpoints are HF-layout folders (config.json, model.safetensors,
tokenizer.json) plus training_state.pt; each is written to a temporary folder and renamed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from data.prepare import CORPORA, DataError, prepare
from minibert import IGNORE_INDEX, BertConfig, BertForMaskedLM, MaskingVocab, load_tokenizer, mask_batch
from minibert.masking import check_replacement_pool, max_predictions, target_slots
from minibert.run import die, interrupted
from minibert.checkpoint import read_header
from minibert.files import append_line, write_file
from minibert.run.folders import (check_run_folder, checkpoints, claim_run_folder, read_json, save_checkpoint,
                                  truncate_metrics, write_json)
from minibert.run.training import (adamw, autocast, autocast_dtype, epoch_order, lr_factor, main_first, memory_of,
                                   parameter_count, pick_device, use_tf32, weights_are_finite)
from minibert.run.corpus import corpus_blocks, corpus_tokenizer
from minibert.text import Blocks

VALID_MASK_SEED = 1234  # the validation split is masked once, identically in every run
SHORT_SEQ_LEN = 16  # the short phase's default block: a head's weight on each neighbour starts at 1/16


def parser() -> argparse.ArgumentParser:
    """Every flag, in four groups: data, model, optimisation, run."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument_group("data")
    a.add_argument("--corpus", nargs="+", default=["en"], metavar="NAME|FILE",
                   help="en (default: VADER sentences + Wikipedia sample, 4.5 MB), en-large (en + BBC news + "
                        "Shakespeare, 13.5 MB), zh (People's Daily), or UTF-8 text files with one document per line")
    a.add_argument("--data-root", default=None, help="where prepared corpora are cached (default: data/cache)")
    a.add_argument("--vocab-size", type=int, default=4096, help="WordPiece vocabulary size (default: 4096)")
    a.add_argument("--seq-len", type=int, default=128,
                   help="tokens per packed block, and the block length the validation is measured on (default: 128)")
    a.add_argument("--short-seq-len", type=int, default=None,
                   help="tokens per block in the short first phase; a divisor of --seq-len, its batches hold "
                        "seq-len / short-seq-len times as many blocks, so a step holds as many positions "
                        "(default: 16 for 128; in general the largest divisor of --seq-len from 5 to "
                        "min(16, seq-len / 4), else seq-len / 4)")
    a.add_argument("--short-fraction", type=float, default=0.5,
                   help="share of --max-steps trained on short blocks before the rest on --seq-len blocks, as BERT "
                        "trained on 128 tokens before 512; short blocks learn where the neighbours are much "
                        "sooner (docs/pretraining.md). 0 = one phase (default: 0.5)")
    m = p.add_argument_group("model")
    m.add_argument("--preset", default="bert-tiny",
                   help="bert-tiny | bert-mini | bert-small | bert-medium | bert-base (default: bert-tiny: on a CPU "
                        "budget it reads the most text, and short runs learn about as much per token at any size)")
    m.add_argument("--layers", type=int, help="override the preset's number of layers")
    m.add_argument("--hidden", type=int, help="override the preset's hidden size (intermediate = 4x unless given)")
    m.add_argument("--heads", type=int, help="override the preset's number of attention heads")
    m.add_argument("--intermediate", type=int, help="override the feed-forward width")
    m.add_argument("--dropout", type=float, default=0.0,
                   help="hidden and attention dropout while pretraining (default: 0; short runs underfit, and "
                        "fine-tuning sets its own)")
    m.add_argument("--sdpa", action=argparse.BooleanOptionalAction, default=True,
                   help="use F.scaled_dot_product_attention (same numbers as the written-out math; default: on)")
    o = p.add_argument_group("optimisation")
    o.add_argument("--max-steps", type=int, default=6000, help="optimizer steps (default: 6000)")
    o.add_argument("--batch-size", type=int, default=16, help="blocks per process per micro-step (default: 16)")
    o.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step (default: 1)")
    o.add_argument("--lr", type=float, default=3e-3,
                   help="peak learning rate (default: 3e-3, picked for bert-tiny with the short first phase: "
                        "docs/pretraining.md); AdamW with BERT's betas (0.9, 0.98) and eps 1e-6")
    o.add_argument("--warmup", type=float, default=0.06, help="warm-up, fraction of --max-steps (default: 0.06)")
    o.add_argument("--schedule", choices=["linear", "cosine"], default="linear",
                   help="decay after warm-up, to 0 at --max-steps (default: linear)")
    o.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay on matrices only (default: 0.01)")
    o.add_argument("--fused-adamw", action=argparse.BooleanOptionalAction, default=True,
                   help="PyTorch's fused AdamW kernel; --no-fused-adamw: the foreach one (default: fused)")
    o.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping, 0 = off (default: 1.0)")
    o.add_argument("--mask-prob", type=float, default=0.3,
                   help="share of ordinary tokens selected (default: 0.3; BERT's 0.15 learns less per step)")
    r = p.add_argument_group("run")
    r.add_argument("--out", default="runs/mlm-en", help="output folder (default: runs/mlm-en)")
    r.add_argument("--seed", type=int, default=0, help="seed of init, data order, masking, dropout (default: 0)")
    r.add_argument("--resume", action="store_true",
                   help="continue from the newest complete checkpoint in --out; flags that change the run's "
                        "data or model must stay as they were, --lr, --max-steps and the like may change")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the run --out holds: all of it is removed first (never a folder of other files, nor one holding this run's inputs)")
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"],
                   help="auto picks cuda, then mps, then cpu (default: auto)")
    r.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                   help="autocast dtype; auto = bf16 on a GPU that has it, else fp32 (default: auto). "
                        "bf16 also runs on a CPU: worth it where the CPU has bf16 matrix units (AMX)")
    r.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                   help="on a CUDA GPU, fp32 matrix products in TF32 (default: on; no effect elsewhere)")
    r.add_argument("--compile", action="store_true",
                   help="torch.compile the step (the same static-shape step as without: targets in fixed slots, "
                        "no attention mask for blocks without padding) as one graph, with CUDA graphs on a GPU "
                        "(no gain on the CPUs measured)")
    r.add_argument("--eval-every", type=int, default=200, help="validate every N steps (default: 200)")
    r.add_argument("--log-every", type=int, default=10, help="append training metrics every N steps (default: 10)")
    r.add_argument("--save-every", type=int, default=200, help="checkpoint every N steps (default: 200)")
    r.add_argument("--keep", type=int, default=2, help="checkpoints kept (default: 2)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def parse_args(argv=None):
    """The flags, checked: a value out of range is one line from argparse, before anything is read."""
    p = parser()
    args = p.parse_args(argv)
    for name in ("max_steps", "batch_size", "grad_accum", "eval_every", "log_every", "save_every", "keep", "vocab_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    checks = {"lr": args.lr > 0, "weight_decay": args.weight_decay >= 0, "clip": args.clip >= 0,
              "warmup": 0 <= args.warmup < 1, "dropout": 0 <= args.dropout < 1, "mask_prob": 0 < args.mask_prob <= 1,
              "short_fraction": 0 <= args.short_fraction < 1}
    limits = {"lr": "a positive number", "weight_decay": "0 or more", "clip": "0 (off) or more",
              "warmup": "in [0, 1)", "dropout": "in [0, 1)", "mask_prob": "in (0, 1]", "short_fraction": "in [0, 1)"}
    for name, ok in checks.items():
        if not (ok and math.isfinite(getattr(args, name))):
            p.error(f"--{name.replace('_', '-')} must be {limits[name]}, got {getattr(args, name)}")
    if args.resume and args.overwrite:
        p.error("--resume continues the run in --out, --overwrite replaces it: pick one")
    if args.seq_len < 5:
        p.error(f"--seq-len must be at least 5 ([CLS] a [SEP] b [SEP]), got {args.seq_len}")
    defaulted = args.short_seq_len is None
    if defaulted:
        args.short_seq_len = default_short_seq_len(args.seq_len)
    if args.short_fraction > 0 and not (5 <= args.short_seq_len < args.seq_len and args.seq_len % args.short_seq_len == 0):
        given = (f"and its default, the largest divisor of --seq-len up to {SHORT_SEQ_LEN} and a quarter of it, or a "
                 f"quarter ({args.short_seq_len}), is not: give one" if defaulted
                 else f"got {args.short_seq_len}")
        p.error(f"--short-seq-len must be at least 5 and a divisor of --seq-len {args.seq_len} below it, {given} "
                "(or turn the short phase off: --short-fraction 0)")
    if not 0 <= args.seed < 2 ** 32:
        p.error(f"--seed must be in [0, 2^32), got {args.seed}")
    return args


# ---- set-up ---------------------------------------------------------------------------------


def model_config(args, vocab_size: int) -> BertConfig:
    try:
        config = BertConfig.from_preset(args.preset, vocab_size=vocab_size, use_sdpa=args.sdpa,
                                        hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
        sizes = {k: v for k, v in (("num_hidden_layers", args.layers), ("hidden_size", args.hidden),
                                   ("num_attention_heads", args.heads), ("intermediate_size", args.intermediate))
                 if v is not None}
        if args.hidden is not None and args.intermediate is None:
            sizes["intermediate_size"] = 4 * args.hidden
        config = replace(config, **sizes)
    except ValueError as e:
        die(str(e))
    if args.seq_len > config.max_position_embeddings:
        die(f"--seq-len {args.seq_len} exceeds the model's max_position_embeddings ({config.max_position_embeddings})")
    return config


def check_memory(config: BertConfig, device: torch.device) -> None:
    """Sizes before memory: the model, its gradients and AdamW's two moments (16 bytes a
    parameter in fp32) must fit in the device's memory, else one line before anything is built."""
    need = 16 * parameter_count(config)
    have = memory_of(device)
    if have and need > have:
        die(f"the model has {parameter_count(config):,} parameters: training it needs about {need / 2**30:,.1f} GiB, "
            f"more than the {have / 2**30:,.1f} GiB of {device}; choose smaller sizes (--preset, --layers, --hidden)")


def corpus_name(corpus: list[str]) -> tuple[str, list[str] | None]:
    if len(corpus) == 1 and corpus[0] in CORPORA:
        return corpus[0], None
    for path in corpus:
        if not os.path.isfile(path):
            die(f"--corpus {path}: no such file (use {', '.join(CORPORA)}, or text files)")
    digest = hashlib.sha256()
    for path in corpus:
        with open(path, "rb") as f:
            digest.update(f.read())
    return "text-" + digest.hexdigest()[:12], corpus


# ---- training -------------------------------------------------------------------------------


def global_batch(n_blocks: int, step: int, size: int, seed: int) -> torch.Tensor:
    """(size,) indices of the blocks of optimizer step `step` among n_blocks: a seeded permutation per epoch."""
    epoch, index = divmod(step, n_blocks // size)
    return epoch_order(n_blocks, seed, epoch)[index * size:(index + 1) * size]


@torch.no_grad()
def evaluate(model, valid: list[dict], device, amp_dtype, rank: int, world: int) -> dict:
    """MLM loss, perplexity and masked-token accuracy on the fixed masking of the validation split."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64)  # loss sum, targets, correct
    for i, batch in enumerate(valid):
        if i % world != rank:
            continue
        b = {k: v.to(device) for k, v in batch.items()}
        with autocast(device, amp_dtype):
            out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"], labels=b["labels"], masked_only=True)
        targets = b["labels"][b["labels"] != IGNORE_INDEX]
        n = targets.numel()
        totals += torch.tensor([out.loss.item() * n, n, (out.logits.argmax(-1) == targets).sum().item()],
                               dtype=torch.float64)
    if world > 1:
        dist.all_reduce(totals)
    model.train()
    loss = totals[0].item() / totals[1].item()
    return {"valid_loss": loss, "valid_ppl": math.exp(min(loss, 50.0)), "valid_acc": totals[2].item() / totals[1].item()}


def mask_valid(blocks: Blocks, vocab: MaskingVocab, batch_size: int, mask_prob: float) -> list[dict]:
    """Mask the whole validation split at once, with a fixed seed: the same targets whatever
    the batch size, the seed or the number of processes, so runs can be compared."""
    ids, attn = blocks.input_ids, blocks.attention_mask
    x, y, attn, _ = mask_batch(ids, attn, vocab.special_mask(ids), vocab.mask_id, vocab.ordinary_tensor,
                               torch.Generator().manual_seed(VALID_MASK_SEED), mask_prob, special_ids=vocab.special_ids)
    return [{"input_ids": x[i:i + batch_size], "labels": y[i:i + batch_size],
             "attention_mask": attn[i:i + batch_size], "token_type_ids": blocks.token_type_ids[i:i + batch_size]}
            for i in range(0, len(blocks), batch_size)]


def unigram_baseline(train: Blocks, valid: list[dict], vocab: MaskingVocab) -> tuple[int, float]:
    """(id, accuracy) of the most frequent ordinary training token, always predicted."""
    ids = train.input_ids[train.attention_mask.bool()]
    counts = torch.bincount(ids, minlength=max(vocab.special_ids) + 1)
    counts[list(vocab.special_ids)] = 0
    top = int(counts.argmax())
    targets = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in valid])
    return top, (targets == top).float().mean().item()


def report(s: dict, metrics_path: str) -> None:
    print(f"checkpoint: {s['checkpoint']}")
    print(f"validation: loss {s['valid_loss']:.3f}, perplexity {s['valid_ppl']:.1f}, masked-token accuracy "
          f"{s['valid_acc']:.3f} (unigram baseline, always {s['unigram_token']!r}: {s['unigram_baseline_acc']:.3f})")
    if s["tokens_per_s"]:
        print(f"trained {s['steps_this_run']} steps in {s['wall_s'] / 60:.1f} min, {s['tokens_per_s']:,.0f} tokens/s")
    print(f"loss curves: python plot_metrics.py {metrics_path}")


# flags a resumed run must keep: they decide the data, the model or the batches
FIXED_ON_RESUME = ("corpus", "vocab_size", "seq_len", "short_seq_len", "short_fraction", "preset", "layers", "hidden",
                   "heads", "intermediate", "seed", "mask_prob")
NOT_COMPARED = ("resume", "overwrite", "out", "data_root", "no_progress")
# what a run saved before a flag existed did: one phase
BEFORE_THE_FLAG = {"short_fraction": 0.0}


def saved_flag(saved: dict, name: str):
    """A flag's value in a checkpoint's saved arguments (BEFORE_THE_FLAG's, for a run older than the flag)."""
    return saved.get(name, BEFORE_THE_FLAG.get(name))


def fixed_flags_changed(saved: dict, args) -> list[str]:
    """The flags of FIXED_ON_RESUME but --corpus that differ from a checkpoint's saved ones, as
    "--name (then, now)"; --short-seq-len counts only where both runs have a short phase (where
    one has none, --short-fraction differs)."""
    one_phase = saved_flag(saved, "short_fraction") == 0 or args.short_fraction == 0
    return [f"--{k.replace('_', '-')} ({saved_flag(saved, k)} then, {getattr(args, k)} now)" for k in FIXED_ON_RESUME
            if k != "corpus" and not (k == "short_seq_len" and one_phase) and saved_flag(saved, k) != getattr(args, k)]


def resumable_checkpoint(args, config: BertConfig, tokenizer, global_size: int, corpus: str, device,
                         say: bool = True):
    """(folder, model, training state) of the newest checkpoint in --out that loads whole, or
    (None, None, None) when there is none yet. A damaged checkpoint (a file unreadable, or a
    training state that does not restore into its model) is skipped with a one-line note;
    flags that may not change on a resume stop the run, the others are applied and said
    (notes and changes are said only when `say`: by the main process)."""
    found = checkpoints(args.out)
    for ckpt in reversed(found):
        try:
            state = torch.load(os.path.join(ckpt, "training_state.pt"), weights_only=True)
            saved_tokenizer = load_tokenizer(ckpt)
            model = BertForMaskedLM.from_pretrained(ckpt, use_sdpa=args.sdpa, hidden_dropout_prob=args.dropout,
                                                    attention_probs_dropout_prob=args.dropout)
            check_training_state(state, model, device)
            step, saved = state["step"], state["args"]
            problem = checkpoint_problem(ckpt, model, step)
        except Exception as e:  # any file of it unreadable or unusable: the checkpoint is damaged
            if say:
                print(f"note: {ckpt} is damaged ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                      "trying the checkpoint before it", file=sys.stderr)
            continue
        if problem:
            if say:
                print(f"note: {ckpt} {problem}; trying the checkpoint before it", file=sys.stderr)
            continue
        same_corpus = state["corpus_name"] == corpus if "corpus_name" in state else saved.get("corpus") == args.corpus
        fixed = fixed_flags_changed(saved, args)
        if not same_corpus:
            then = state.get("corpus_name", " ".join(saved.get("corpus") or ()))
            fixed.insert(0, f"--corpus (its text: {then} then, {corpus} now)" if saved.get("corpus") == args.corpus
                         else f"--corpus ({' '.join(saved.get('corpus') or ())} then, {' '.join(args.corpus)} now)")
        if state.get("global_batch", global_size) != global_size:
            fixed.append(f"the global batch ({state['global_batch']} then, {global_size} now)")
        if fixed:
            die(f"--resume: {', '.join(fixed)} differ from the run in {args.out}; these decide its data, model or "
                "batches, so give the values it was started with, or start a new run in another --out")
        if saved_tokenizer.to_str() != tokenizer.to_str():
            die(f"the tokenizer in {ckpt} differs from the one for --corpus {' '.join(args.corpus)} "
                f"--vocab-size {args.vocab_size}; resume with the same data settings")
        sizes = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        if any(getattr(model.config, k) != getattr(config, k) for k in sizes):
            die(f"{ckpt} holds a model of other sizes than the one asked for; resume with the same model flags")
        if args.max_steps < step:
            die(f"--max-steps {args.max_steps} is below the step of the checkpoint in {args.out} ({step}); "
                f"give at least {step}")
        changed = [f"--{k.replace('_', '-')} {saved[k]} -> {getattr(args, k)}" for k in sorted(saved)
                   if k not in FIXED_ON_RESUME + NOT_COMPARED and hasattr(args, k) and saved[k] != getattr(args, k)]
        if changed and say:
            print(f"resume: {', '.join(changed)} (applied from step {step} on)")
        return ckpt, model, state
    if found:
        die(f"no checkpoint in {os.path.join(args.out, 'checkpoints')} loads whole; start again with --overwrite")
    return None, None, None


def check_training_state(state: dict, model, device) -> None:
    """Raise if a checkpoint's training state cannot be restored into `model`: it is loaded into
    a throwaway optimizer, schedule and generators first, so a bad one (a wrong type, a missing
    key, a generator state of another size) is skipped like a damaged file, and nothing the run
    uses is changed."""
    if type(state["step"]) is not int or state["step"] < 0:
        raise ValueError(f"step {state['step']!r} is not a step number")
    if not isinstance(state["args"], dict):
        raise ValueError("args is not a record of the flags")
    if "short_steps" in state and (type(state["short_steps"]) is not int or state["short_steps"] < 0):
        raise ValueError(f"short_steps {state['short_steps']!r} is not a number of steps")
    params = list(model.parameters())
    optimizer = adamw(params, 1.0, 0.0, fused=False)
    optimizer.load_state_dict(state["optimizer"])
    for p in params:
        for value in optimizer.state[p].values():
            if torch.is_tensor(value) and value.dim() and value.shape != p.shape:
                raise ValueError(f"an optimizer state of shape {tuple(value.shape)} for a parameter of {tuple(p.shape)}")
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0).load_state_dict(dict(state["scheduler"]))
    torch.Generator(device=device).set_state(state["masker_rng"])
    torch.Generator().set_state(state["torch_rng"])
    if device.type == "cuda" and state["cuda_rng"] is not None:
        torch.Generator(device=device).set_state(state["cuda_rng"])


def checkpoint_problem(ckpt: str, model, step: int) -> str | None:
    """Why a checkpoint that loaded must still not be resumed from, or None: weights that are
    not finite, or weights saved at another step than its training state's (files swapped)."""
    if not weights_are_finite(model):
        return "holds weights that are not finite"
    saved = read_header(os.path.join(ckpt, "model.safetensors"))[1].get("step")
    if saved is not None and saved != str(step):
        return f"holds the weights of step {saved} beside the training state of step {step}"
    return None


# ---- the run, step by step ------------------------------------------------------------------


@dataclass
class Run:
    """One pretraining run: what set_up() and build_or_resume() make, handed to every step."""

    args: argparse.Namespace
    device: torch.device
    amp_dtype: torch.dtype | None
    rank: int
    world: int
    corpus: str                        # the corpus's name (text files: a digest of their bytes)
    config: BertConfig
    tokenizer: object                  # tokenizers.Tokenizer
    vocab: MaskingVocab
    train_blocks: Blocks
    valid_blocks: Blocks
    short_blocks: Blocks | None        # the training split in --short-seq-len blocks (None: one phase)
    inputs: tuple[str, ...]            # what --overwrite must never delete: the data cache, the corpus files
    lock: object | None = None         # the open lock file of --out (main process only), once claimed
    model: BertForMaskedLM | None = None
    ddp_model: torch.nn.parallel.DistributedDataParallel | None = None
    train_model: torch.nn.Module | None = None  # the model as trained: DDP-wrapped and/or compiled
    optimizer: torch.optim.Optimizer | None = None
    scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
    scaler: torch.amp.GradScaler | None = None
    masker: torch.Generator | None = None  # draws the masking, on the device the model trains on
    start: int = 0                     # the first step this process runs
    short_steps: int = 0               # steps of the short first phase (a resume past it keeps it)
    checkpoint: str | None = None      # the last good checkpoint: resumed from, then each one written
    progress: object | None = None     # the tqdm bar of the main process

    @property
    def ddp(self) -> bool:
        return self.world > 1

    @property
    def main_process(self) -> bool:
        return self.rank == 0

    @property
    def global_size(self) -> int:
        return self.args.batch_size * self.args.grad_accum * self.world

    @property
    def metrics_path(self) -> str:
        return os.path.join(self.args.out, "metrics.jsonl")


def set_up(args) -> Run:
    """Processes and device; then, the main process first (main_first: a refusal is one line,
    said by it alone), every check of the flags and of --out and the data (the main process
    prepares and caches it, the others read the cache)."""
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = pick_device(args.device)
    if ddp:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    return main_first(lambda: checked_run(args, device, rank, world), rank, world)


def checked_run(args, device: torch.device, rank: int, world: int) -> Run:
    """Number formats, the checks of the flags and of --out (main process), the data."""
    amp_dtype = autocast_dtype(args.dtype, device)
    use_tf32(device, args.tf32)
    config = model_config(args, args.vocab_size)  # checks sizes and --seq-len before anything is written
    check_memory(config, device)
    name, files = corpus_name(args.corpus)
    root = args.data_root or os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cache")
    inputs = (root, *(files or ()))  # what --overwrite must never delete
    if rank == 0:
        check_run_folder(args.out, "pretraining", args.resume, args.overwrite, inputs)
    try:
        folder = prepare(name, files, root)
        tokenizer = corpus_tokenizer(folder, args.vocab_size)
        train_blocks = corpus_blocks(folder, tokenizer, "train", args.seq_len)
        valid_blocks = corpus_blocks(folder, tokenizer, "valid", args.seq_len)
        short_blocks = corpus_blocks(folder, tokenizer, "train", args.short_seq_len) if args.short_fraction else None
    except (DataError, ValueError) as e:
        die(str(e))
    except OSError as e:  # a missing split file, or a full disk while caching
        die(f"the data cache {os.path.join(root, name)}: {e.filename}: {e.strerror}; free some space, or delete "
            "that folder to prepare it again")
    config = replace(config, vocab_size=tokenizer.get_vocab_size(), pad_token_id=tokenizer.token_to_id("[PAD]"))
    global_size = args.batch_size * args.grad_accum * world
    for blocks, size in ((train_blocks, global_size), (short_blocks, short_global_size(args, global_size))):
        if blocks is not None and len(blocks) < size:
            die(f"the training split has {len(blocks)} blocks of {blocks.input_ids.shape[1]} tokens, fewer than one "
                f"global batch ({size}); give more text or lower --batch-size")
    return Run(args, device, amp_dtype, rank, world, name, config, tokenizer, MaskingVocab.from_tokenizer(tokenizer),
               train_blocks, valid_blocks, short_blocks, inputs)


def build_or_resume(run: Run) -> None:
    """The model, AdamW and its schedule, the masking generator and the loss scaler: new, or
    (with --resume) from the newest checkpoint in --out that loads whole."""
    args, device = run.args, run.device

    def checked_model():
        if args.resume:
            run.checkpoint, run.model, state = resumable_checkpoint(args, run.config, run.tokenizer,
                                                                    run.global_size, run.corpus, device,
                                                                    run.main_process)
            if run.checkpoint is not None:
                return state
        torch.manual_seed(args.seed)
        try:
            run.model = BertForMaskedLM(run.config)
        except (RuntimeError, MemoryError) as e:
            die(f"cannot build the model ({str(e).splitlines()[0][:120]}); choose smaller sizes")
        return None

    def claim():
        if run.main_process:
            run.lock = claim_run_folder(args.out, "pretraining", args.resume, args.overwrite, run.inputs)

    state = main_first(checked_model, run.rank, run.world)
    main_first(claim, run.rank, run.world)  # every check passed everywhere: only now is --out claimed (and emptied)
    run.model.to(device)
    # BERT's pretraining AdamW: betas (0.9, 0.98), eps 1e-6 (fine-tuning keeps PyTorch's 0.999 and 1e-8)
    run.optimizer = adamw(run.model.parameters(), args.lr, args.weight_decay, args.fused_adamw, betas=(0.9, 0.98),
                          eps=1e-6)
    warmup_steps = max(1, int(args.warmup * args.max_steps))
    run.scheduler = torch.optim.lr_scheduler.LambdaLR(
        run.optimizer, lambda step: lr_factor(step, args.max_steps, warmup_steps, args.schedule))
    run.masker = torch.Generator(device=device).manual_seed(args.seed)
    run.short_steps = short_steps(args)
    if state is not None:
        restore_training_state(run, state, warmup_steps)
    elif run.rank:
        torch.manual_seed(args.seed + 1000 * run.rank)  # dropout differs per process
    run.scaler = torch.amp.GradScaler(device.type, enabled=run.amp_dtype == torch.float16)
    if run.ddp:
        run.ddp_model = torch.nn.parallel.DistributedDataParallel(
            run.model, device_ids=[device.index] if device.type == "cuda" else None)
    run.train_model = run.ddp_model or run.model
    if args.compile:
        # one static graph per step (see train_step); CUDA graphs replay it without launch overhead
        run.train_model = torch.compile(run.train_model, fullgraph=not run.ddp, dynamic=False,
                                        mode="reduce-overhead" if device.type == "cuda" else None)


def restore_training_state(run: Run, state: dict, warmup_steps: int) -> None:
    """Optimizer, schedule and generators as the checkpoint left them; a changed --lr, --max-steps,
    --warmup, --schedule or --weight-decay takes effect from the resumed step on (--max-steps moves
    the end of the short phase only while the run is still in it)."""
    args = run.args
    run.optimizer.load_state_dict(state["optimizer"])
    for group in run.optimizer.param_groups:  # the kernel is this run's choice, not the checkpoint's
        group["fused"], group["foreach"] = (True, None) if args.fused_adamw else (None, True)
    run.scheduler.load_state_dict(state["scheduler"])
    run.masker.set_state(state["masker_rng"])
    run.start = state["step"]
    saved = state["args"]
    # a run past its short phase never goes back to it; one inside it ends it at --short-fraction of
    # the new --max-steps (a checkpoint older than the saved count: the phase its flags gave)
    fraction = saved_flag(saved, "short_fraction")
    ended = state.get("short_steps", round(fraction * saved["max_steps"])) if fraction else 0
    run.short_steps = ended if run.start >= ended else max(run.start, run.short_steps)
    if any(saved.get(k) != getattr(args, k) for k in ("lr", "max_steps", "warmup", "schedule", "weight_decay")):
        run.scheduler.base_lrs = [args.lr] * len(run.optimizer.param_groups)
        for group in run.optimizer.param_groups:
            group["initial_lr"] = args.lr
            group["lr"] = args.lr * lr_factor(run.start, args.max_steps, warmup_steps, args.schedule)
        run.optimizer.param_groups[0]["weight_decay"] = args.weight_decay  # the matrices' group
    if run.rank == 0:  # the RNG states saved are rank 0's; other ranks reseed (dropout only)
        torch.set_rng_state(state["torch_rng"])
        if run.device.type == "cuda" and state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], run.device)
    else:
        torch.manual_seed(args.seed + 1000 * run.rank + run.start)


def stop(run: Run, reason: str, advice: str = "try a lower --lr, or --dtype fp32"):
    """End a run that cannot go on, naming the last good checkpoint. Every process stops on the
    same (all-reduced) numbers, or inside main_first: the main process says why, the others
    exit quietly."""
    if run.progress:
        run.progress.close()
    if not run.main_process:
        sys.exit(1)
    where = f"the last good checkpoint is {run.checkpoint}" if run.checkpoint else "no checkpoint was written"
    die(f"{reason}; stopping ({where}). {advice[:1].upper()}{advice[1:]}.")


def log(run: Run, record: dict) -> None:
    """Append one line to metrics.jsonl (main process only; a failure stops every process)."""
    def append():
        if run.main_process:
            try:
                append_line(run.metrics_path, json.dumps(record))
            except OSError as e:
                stop(run, f"cannot append to {run.metrics_path} ({e.strerror})", "free some space, then --resume")

    main_first(append, run.rank, run.world)


@dataclass
class Batch:
    """One global batch on the device, masked: (G, T) each; `full` is True when no block of it
    holds padding (a static step then runs attention without a mask)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    full: bool


def train_step(run: Run, batch: Batch, slots: int, step: int, read_loss: bool) -> tuple[float, torch.Tensor]:
    """Optimizer step `step` (1-based) on a masked global batch: the loss of each micro-batch, backward,
    clipping, the finite checks, the AdamW update. The loss is the mean over every target of the
    global batch, whatever the number of processes and micro-batches. Returns the training loss
    (read from the device only when `read_loss`, else nan) and the gradient norm (a tensor)."""
    args, world = run.args, run.world
    is_target = batch.labels != IGNORE_INDEX              # (G, T): G = batch size x micro-batches x processes
    n_global = is_target.sum()
    loss_sum = torch.zeros((), dtype=torch.float64, device=run.device)
    rows = batch.input_ids.shape[0] // (args.grad_accum * world)  # blocks per micro-batch and process
    for micro in range(args.grad_accum):
        lo = (micro * world + run.rank) * rows
        part = slice(lo, lo + rows)
        n_micro = is_target[part].sum()
        sync = micro == args.grad_accum - 1 or not run.ddp
        with (contextlib.nullcontext() if sync else run.ddp_model.no_sync()), autocast(run.device, run.amp_dtype):
            # static shapes, eager or compiled: the targets in P fixed slots per row, and no attention
            # mask where nothing is padding; nothing here reads a value back from the device
            if args.compile and run.device.type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()  # the last replay's outputs are done with
            positions, slot_labels = target_slots(batch.labels[part], slots)             # (B, P) each
            mask = None if batch.full else batch.attention_mask[part]
            out = run.train_model(batch.input_ids[part], mask, batch.token_type_ids[part], labels=slot_labels,
                                  target_positions=positions)
            # this micro-batch's mean -> its share of the global batch's mean; DDP averages
            # gradients over processes, hence the factor `world`
            loss = out.loss * (n_micro / n_global) * world
        run.scaler.scale(loss).backward()
        loss_sum += out.loss.detach().double() * n_micro
    if run.ddp:
        dist.all_reduce(loss_sum)
    run.scaler.unscale_(run.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), args.clip if args.clip > 0 else float("inf"))
    train_loss = float("nan")
    if read_loss:  # before the update; with fp16 the scaler itself skips steps with inf gradients
        train_loss = (loss_sum / n_global).item()
        if not math.isfinite(train_loss):
            stop(run, f"the training loss became {train_loss} at step {step}")
        if not run.scaler.is_enabled() and not math.isfinite(grad_norm):
            stop(run, f"the gradient norm became {float(grad_norm)} at step {step}")
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    run.scheduler.step()
    return train_loss, grad_norm


def save(run: Run, step: int) -> None:
    """Checkpoint `step` (main process; only finite weights are ever called a good checkpoint)."""
    state = {"step": step, "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
             "masker_rng": run.masker.get_state(), "torch_rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state(run.device) if run.device.type == "cuda" else None,
             "args": dict(vars(run.args)), "global_batch": run.global_size, "corpus_name": run.corpus,
             "short_steps": run.short_steps}
    def write():
        if run.main_process:
            if not weights_are_finite(run.model):
                stop(run, f"the weights are no longer finite at step {step}")
            try:
                run.checkpoint = save_checkpoint(run.args.out, step, run.model, run.tokenizer, state, run.args.keep)
            except OSError as e:
                stop(run, f"cannot write the checkpoint of step {step} ({e.strerror})",
                     "free some space, then --resume")

    main_first(write, run.rank, run.world)  # the others wait for it, and stop with it


def evaluate_and_checkpoint(run: Run, valid: list[dict], done: int) -> dict | None:
    """At --eval-every and --save-every steps (and the last): validate, stop a diverged run, and
    checkpoint. Returns the validation numbers when they were measured."""
    args, last = run.args, None
    final = done == args.max_steps
    if done % args.eval_every == 0 or final:
        last = evaluate(run.model, valid, run.device, run.amp_dtype, run.rank, run.world)
        log(run, {"step": done, **last})
        ceiling = math.log(run.config.vocab_size) + 1
        if last["valid_loss"] > ceiling:
            stop(run, f"the validation loss is {last['valid_loss']:.1f} at step {done}, more than ln V + 1 = "
                      f"{ceiling:.1f} (worse than guessing every token uniformly): the run diverged")
    if done % args.save_every == 0 or final:
        save(run, done)
    return last


@dataclass
class Phase:
    """Training blocks of one length, from optimizer step `first` (0-based) on: the text on the
    device, where it is masked, and the counts for tokens/s on the CPU."""

    first: int
    global_size: int                   # blocks per global batch: the same number of positions in each phase
    slots: int                         # target slots per block (max_predictions)
    ids: torch.Tensor                  # (S, T) on the device
    attention_mask: torch.Tensor       # (S, T) on the device
    token_type_ids: torch.Tensor       # (S, T) on the device
    real_per_block: torch.Tensor       # (S,) on the CPU
    full_block: torch.Tensor           # (S,) on the CPU: no padding in the block

    @classmethod
    def of(cls, blocks: Blocks, first: int, global_size: int, mask_prob: float, device) -> "Phase":
        ids, attn, types = (t.to(device) for t in (blocks.input_ids, blocks.attention_mask, blocks.token_type_ids))
        return cls(first, global_size, max_predictions(ids.shape[1], mask_prob), ids, attn, types,
                   blocks.attention_mask.sum(dim=1), blocks.attention_mask.bool().all(dim=1))

    def batch_rows(self, step: int, seed: int) -> torch.Tensor:
        """(G,) indices of the blocks of optimizer step `step`: a seeded permutation per epoch of this phase."""
        return global_batch(len(self.ids), step - self.first, self.global_size, seed)


def default_short_seq_len(seq_len: int) -> int:
    """--short-seq-len's default: the longest block of at least 5 tokens that divides --seq-len and
    is at most 16 tokens and a quarter of --seq-len (128 -> 16, 32 -> 8, 72 -> 12, 100 -> 10); where
    there is none, a quarter of --seq-len (68 -> 17), which parse_args then checks."""
    limit = min(SHORT_SEQ_LEN, seq_len // 4)
    return max((d for d in range(5, limit + 1) if seq_len % d == 0), default=seq_len // 4)


def short_global_size(args, global_size: int) -> int:
    """Blocks per global batch in the short phase: seq-len / short-seq-len times --seq-len's, the same positions."""
    return global_size * (args.seq_len // args.short_seq_len)


def short_steps(args) -> int:
    """Optimizer steps of the short first phase: --short-fraction of --max-steps, rounded, and at
    least one step fewer than --max-steps (the model is validated on --seq-len blocks)."""
    return min(round(args.short_fraction * args.max_steps), args.max_steps - 1)


def phases(run: Run) -> list[Phase]:
    """The short phase (when this process still has steps of it to run), then the --seq-len blocks
    until --max-steps."""
    args, short = run.args, run.short_steps
    long = Phase.of(run.train_blocks, short, run.global_size, args.mask_prob, run.device)
    if run.start >= short:
        return [long]
    size = short_global_size(args, run.global_size)
    return [Phase.of(run.short_blocks, 0, size, args.mask_prob, run.device), long]


def train(run: Run, valid: list[dict]) -> dict:
    """The loop: a seeded global batch of the step's phase, masked on the device, one train_step,
    the log, and evaluate_and_checkpoint. Returns the last validation numbers and the token count
    and times (validation and checkpoints are kept out of tokens/s)."""
    args, device = run.args, run.device
    schedule = phases(run)
    vocab = run.vocab
    # the replacement pool is checked once here; every step then masks without reading a value
    pool = check_replacement_pool(vocab.ordinary_tensor, vocab.special_ids, vocab.mask_id).to(device)
    # the loss is read from the device only where it is logged; a CPU reads it every step
    read_every = 1 if device.type == "cpu" else args.log_every
    t0, tokens_seen, outside_s, last, train_loss = time.time(), 0, 0.0, None, float("nan")
    run.model.train()
    for step in range(run.start, args.max_steps):
        phase = [p for p in schedule if p.first <= step][-1]
        rows = phase.batch_rows(step, args.seed)                         # (G,) on the CPU
        on_device = rows.to(device)
        ids, attn = phase.ids[on_device], phase.attention_mask[on_device]  # (G, T) each
        x, y, attn, _ = mask_batch(ids, attn, vocab.special_mask(ids), vocab.mask_id, pool, run.masker,
                                   args.mask_prob, check=False)
        batch = Batch(x, y, attn, phase.token_type_ids[on_device], bool(phase.full_block[rows].all()))
        lr = run.optimizer.param_groups[0]["lr"]
        done = step + 1
        log_now = done % args.log_every == 0 or done == args.max_steps
        loss, grad_norm = train_step(run, batch, phase.slots, done, read_loss=log_now or done % read_every == 0)
        train_loss = loss if log_now or done % read_every == 0 else train_loss
        tokens_seen += int(phase.real_per_block[rows].sum())
        if log_now:
            log(run, {"step": done, "train_loss": train_loss, "lr": lr, "grad_norm": float(grad_norm),
                      "tokens_per_s": tokens_seen / (time.time() - t0 - outside_s)})
        t_outside = time.time()
        last = evaluate_and_checkpoint(run, valid, done) or last
        outside_s += time.time() - t_outside
        if run.progress:
            run.progress.set_postfix(loss=f"{train_loss:.3f}",
                                     tok_s=f"{tokens_seen / (time.time() - t0 - outside_s):,.0f}",
                                     **({"val_acc": f"{last['valid_acc']:.3f}"} if last else {}))
            run.progress.update(1)
    if run.progress:
        run.progress.close()
    return {"last": last, "tokens_seen": tokens_seen, "wall_s": time.time() - t0, "outside_s": outside_s}


def finish(run: Run, valid: list[dict], result: dict, baseline: tuple[int, float]) -> None:
    """The summary (summary.json, written once) and the report; when nothing ran, the saved one."""
    last = result["last"]
    if last is None:  # nothing left to run: report the checkpoint's numbers
        last = evaluate(run.model, valid, run.device, run.amp_dtype, run.rank, run.world)
    if run.main_process:
        summary_path = os.path.join(run.args.out, "summary.json")
        summary = None if result["tokens_seen"] else read_json(summary_path)
        if summary is None:
            top_token, baseline_acc = baseline
            wall, outside, tokens = result["wall_s"], result["outside_s"], result["tokens_seen"]
            summary = {**last, "unigram_baseline_acc": baseline_acc,
                       "unigram_token": run.tokenizer.id_to_token(top_token), "checkpoint": run.checkpoint, "steps": run.args.max_steps,
                       "steps_this_run": run.args.max_steps - run.start, "wall_s": wall,
                       "eval_and_checkpoint_s": outside, "tokens_per_s": tokens / (wall - outside) if tokens else None}
            try:
                write_json(summary_path, summary)
            except OSError as e:
                stop(run, f"cannot write {summary_path} ({e.strerror})", "free some space, then --resume")
        report(summary, run.metrics_path)
    if run.lock:
        run.lock.close()  # releases --out for the next process
    if run.ddp:
        dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    run = set_up(args)
    build_or_resume(run)
    valid = mask_valid(run.valid_blocks, run.vocab, args.batch_size, args.mask_prob)
    baseline = unigram_baseline(run.train_blocks, valid, run.vocab)

    def start_log():
        if run.main_process:
            try:
                if run.checkpoint:
                    truncate_metrics(run.metrics_path, run.start)
                else:
                    write_file(run.metrics_path, b"")
            except OSError as e:
                die(f"cannot write {run.metrics_path} ({e.strerror}); free some space or choose another --out")

    main_first(start_log, run.rank, run.world)
    if run.main_process:
        config = run.config
        n_params = sum(p.numel() for p in run.model.parameters())
        print(f"minibert MLM: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
              f"{config.num_attention_heads} heads, vocab {config.vocab_size}, {n_params / 1e6:.2f}M parameters; "
              f"{len(run.train_blocks):,} training blocks of {args.seq_len} tokens; global batch {run.global_size}; "
              + (f"steps 1-{run.short_steps:,} on {len(run.short_blocks):,} blocks of {args.short_seq_len} tokens, "
                 f"{short_global_size(args, run.global_size)} a batch; " if run.short_steps else "")
              + f"device {run.device}" + (f" x{run.world}" if run.ddp else "")
              + (f"; resumed at step {run.start} from {run.checkpoint}" if run.checkpoint else ""))
        if not args.no_progress and run.start < args.max_steps:
            from tqdm import tqdm
            run.progress = tqdm(total=args.max_steps, initial=run.start, unit="step", dynamic_ncols=True)
    try:
        result = train(run, valid)
    except KeyboardInterrupt:
        if run.progress:
            run.progress.close()
        interrupted(f"the last checkpoint is {run.checkpoint}; --resume continues from it" if run.checkpoint
                    else "no checkpoint was written yet; run again with --overwrite to start afresh", run.main_process)
    finish(run, valid, result, baseline)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        interrupted("nothing is half-written; --resume continues from the last checkpoint, if there is one")
