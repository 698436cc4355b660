"""Pretrain a small BERT by masked language modelling (and next-sentence prediction), on a GPU or a CPU.

    python train_mlm.py                                  # bert-tiny on the English corpus, ~9 min on 2 CPU cores
    python train_mlm.py --corpus zh --out runs/mlm-zh    # the Chinese corpus
    python train_mlm.py --corpus docs/*.md --out runs/mlm-mine   # your text files (here: the docs)
    python train_mlm.py --objective mlm+nsp --out runs/nsp-en    # BERT's two tasks: masked LM + next sentence
    python train_mlm.py --resume                         # continue the run in --out
    torchrun --nproc_per_node=2 train_mlm.py ...         # DistributedDataParallel (gloo on CPU, NCCL on GPU)

Each step draws a seeded global batch of packed blocks `[CLS] A [SEP] B [SEP]`, masks it with
`mask_batch` (30% of the ordinary tokens, BERT's 80/10/10 split), and takes one AdamW step on
the MLM loss: the mean over every masked token of the global batch, whatever the number of
processes and accumulation steps. The first half of the steps reads 16-token blocks, eight
times as many per batch (short blocks teach a small model where its neighbours are much
sooner, as BERT trained on 128 tokens before 512); the rest reads 128-token blocks. Every
--eval-every steps the loss is measured on the validation split, masked once with a fixed seed;
every --save-every steps a checkpoint is written (HF's layout plus training_state.pt).

With --objective mlm+nsp the long blocks are BERT's next-sentence pairs instead (minibert/pairs.py):
A and B from one document, B really following A half the time; the pooler's [CLS] vector then
also learns whether it does, and the loss is the MLM mean plus the pairs' next-sentence mean.
The short phase stays masked LM on packed text: a 16-token block holds no two sentences.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from data.prepare import CACHE, CORPORA, prepare
from minibert import IGNORE_INDEX, PreTrainingOutput
from minibert.files import write_file
from minibert.masking import check_replacement_pool, fixed_masking, mask_batch, target_slots
from minibert.run import die, interrupted, interrupts_ignored, run_script, write_advice
from minibert.run.flags import (AT_LEAST_1, AT_LEAST_0, FRACTION, POSITIVE, PROBABILITY, SEED, Parser, add_device,
                                check_ranges)
from minibert.run.folders import check_claimed, truncate_metrics, write_json
from minibert.run.pretraining import (ADAMW_BETAS, ADAMW_EPS, OBJECTIVES, Phase, Run, at_max_steps,
                                      default_short_seq_len, log, new_or_resumed_model, note_a_larger_vocabulary,
                                      nothing_to_train, phases, planned_short_steps, restore, save, short_global_size,
                                      start, stop, stop_on_numbers, training_state, warmup_length)
from minibert.run.training import adamw, autocast, finish_together, lr_factor, main_first


def parser() -> argparse.ArgumentParser:
    """Every flag and its default, in four groups: data, model, optimisation, run."""
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument_group("data")
    a.add_argument("--corpus", nargs="+", default=["en"], metavar="NAME|FILE",
                   help="en (default: VADER sentences + Wikipedia sample, 4.5 MB), en-large (en + BBC news + "
                        "Shakespeare, 13.5 MB), zh (People's Daily), or UTF-8 text files: one document per line, "
                        "or blank lines between documents")
    a.add_argument("--data-root", default=None, help="where prepared corpora are cached (default: data/cache)")
    a.add_argument("--vocab-size", type=int, default=4096, help="WordPiece vocabulary size (default: 4096)")
    a.add_argument("--seq-len", type=int, default=128,
                   help="tokens per packed block, and the block length validation is measured on (default: 128)")
    a.add_argument("--short-fraction", type=float, default=0.5,
                   help="share of --max-steps trained on --short-seq-len blocks first; 0 = one phase (default: 0.5)")
    a.add_argument("--short-seq-len", type=int, default=None,
                   help="tokens per block in the short phase: a divisor of --seq-len, whose batches hold seq-len / "
                        "short-seq-len times as many blocks (default: 16 for 128; else the largest divisor from 5 "
                        "to min(16, seq-len / 4))")
    m = p.add_argument_group("model")
    m.add_argument("--objective", choices=list(OBJECTIVES), default="mlm",
                   help="mlm: masked LM on packed text (RoBERTa's choice); mlm+nsp: BERT's masked LM plus "
                        "next-sentence prediction on pairs from each document (default: mlm)")
    m.add_argument("--preset", default="bert-tiny",
                   help="bert-tiny | bert-mini | bert-small | bert-medium | bert-base (default: bert-tiny)")
    m.add_argument("--layers", type=int, help="override the preset's number of layers")
    m.add_argument("--hidden", type=int, help="override the preset's hidden size (intermediate = 4x unless given)")
    m.add_argument("--heads", type=int, help="override the preset's number of attention heads")
    m.add_argument("--intermediate", type=int, help="override the feed-forward width")
    m.add_argument("--dropout", type=float, default=0.0,
                   help="hidden and attention dropout (default: 0: short runs underfit; fine-tuning sets its own)")
    m.add_argument("--sdpa", action=argparse.BooleanOptionalAction, default=True,
                   help="F.scaled_dot_product_attention instead of the written-out softmax (default: on)")
    o = p.add_argument_group("optimisation")
    o.add_argument("--max-steps", type=int, default=6000, help="optimizer steps (default: 6000)")
    o.add_argument("--batch-size", type=int, default=16, help="blocks per process per micro-step (default: 16)")
    o.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step (default: 1)")
    o.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default: 3e-3, picked for bert-tiny)")
    o.add_argument("--warmup", type=float, default=0.06, help="warm-up, fraction of --max-steps (default: 0.06)")
    o.add_argument("--schedule", choices=["linear", "cosine"], default="linear",
                   help="decay after warm-up, to 0 at --max-steps (default: linear)")
    o.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay on matrices (default: 0.01)")
    o.add_argument("--fused-adamw", action=argparse.BooleanOptionalAction, default=True,
                   help="PyTorch's fused AdamW kernel; --no-fused-adamw: the foreach one (default: fused)")
    o.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping, 0 = off (default: 1.0)")
    o.add_argument("--mask-prob", type=float, default=0.3,
                   help="share of ordinary tokens selected (default: 0.3; BERT's 0.15 learns less per step)")
    r = p.add_argument_group("run")
    r.add_argument("--out", default="runs/mlm-en", help="output folder (default: runs/mlm-en)")
    r.add_argument("--seed", type=int, default=0, help="seed of init, data order, masking, dropout (default: 0)")
    r.add_argument("--resume", action="store_true",
                   help="continue from the newest complete checkpoint in --out; flags that decide the data or the "
                        "model must stay as they were, --lr, --max-steps and the like may change")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the run --out holds (never a folder of other files, nor one holding an input)")
    add_device(r, tf32=True)
    r.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                   help="autocast dtype; auto = bf16 on a GPU that has it, else fp32 (default: auto); bf16 also "
                        "runs on a CPU, worth it where the CPU has bf16 matrix units (AMX)")
    r.add_argument("--compile", action="store_true",
                   help="torch.compile the model (static shapes: targets in fixed slots, no attention mask on "
                        "blocks without padding), with CUDA graphs on a GPU; no gain on the CPUs measured")
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
    check_ranges(p, args, {
        **dict.fromkeys(("max_steps", "batch_size", "grad_accum", "eval_every", "log_every", "save_every", "keep",
                         "vocab_size"), AT_LEAST_1),
        "lr": POSITIVE, "weight_decay": AT_LEAST_0, "clip": AT_LEAST_0, "warmup": FRACTION, "dropout": FRACTION,
        "mask_prob": PROBABILITY, "short_fraction": FRACTION, "seed": SEED})
    if args.resume and args.overwrite:
        p.error("--resume continues the run in --out, --overwrite replaces it: pick one")
    if args.seq_len < 5:
        p.error(f"--seq-len must be at least 5 ([CLS] a [SEP] b [SEP]), got {args.seq_len}")
    defaulted = args.short_seq_len is None
    if defaulted:
        args.short_seq_len = default_short_seq_len(args.seq_len)
    if args.short_fraction > 0 and not (5 <= args.short_seq_len < args.seq_len and args.seq_len % args.short_seq_len == 0):
        given = (f"and its default, the largest divisor of --seq-len up to 16 and a quarter of it, or a quarter "
                 f"({args.short_seq_len}), is not: give one" if defaulted else f"got {args.short_seq_len}")
        kept = (": --resume keeps the run's own --seq-len, --short-seq-len and --short-fraction, so give those"
                if args.resume else " (or turn the short phase off: --short-fraction 0)")
        p.error(f"--short-seq-len must be at least 5 and a divisor of --seq-len {args.seq_len} below it, {given}{kept}")
    args.data_root = args.data_root or CACHE
    return args


# ---- the loop ---------------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    run = start(args, CORPORA, prepare)            # processes, device, checks, the corpus packed into blocks
    model, state = new_or_resumed_model(run)       # new from --seed, or the newest checkpoint that loads whole
    if at_max_steps(run, state):                   # resumed at --max-steps: said, and the run left as it is
        nothing_to_train(run)
        return
    model.to(run.device)
    # AdamW with RoBERTa's betas and BERT's eps (ADAMW_BETAS, ADAMW_EPS); decay on matrices only
    optimizer = adamw(model.parameters(), args.lr, args.weight_decay, args.fused_adamw, betas=ADAMW_BETAS, eps=ADAMW_EPS)
    warmup_steps = warmup_length(args.warmup, args.max_steps)
    # LambdaLR passes the number of updates done: 0 before step 1
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda done: lr_factor(done, args.max_steps, warmup_steps, args.schedule))
    masker = torch.Generator(device=run.device).manual_seed(args.seed)  # draws every training masking
    run.short_steps = planned_short_steps(args)
    if state is not None:
        restore(run, state, optimizer, scheduler, masker, warmup_steps)
    elif run.rank:
        torch.manual_seed(args.seed + 1000 * run.rank)  # dropout differs per process
    scaler = torch.amp.GradScaler(run.device.type, enabled=run.amp_dtype == torch.float16)  # fp16 only
    step_model = model  # what a step calls: the model, DDP-wrapped and/or compiled
    if run.world > 1:
        step_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[run.device.index] if run.device.type == "cuda" else None)
    if args.compile:  # CUDA graphs replay the static-shape step without launch overhead
        step_model = torch.compile(step_model, fullgraph=run.world == 1, dynamic=False,
                                   mode="reduce-overhead" if run.device.type == "cuda" else None)
    valid = fixed_masking(run.valid_blocks, run.vocab, args.mask_prob)  # the same targets in every run
    unigram = unigram_baseline(run, valid["labels"])
    start_log(run)
    if run.main_process:
        print(describe(run, model))
        note_a_larger_vocabulary(run)  # said once every check has passed
        if not args.no_progress:
            from tqdm import tqdm
            run.progress = tqdm(total=args.max_steps, initial=run.start, unit="step", dynamic_ncols=True)
    try:
        result = train(run, model, step_model, optimizer, scheduler, scaler, masker, valid)
    except KeyboardInterrupt:
        if run.progress:
            run.progress.close()
        interrupted(f"the last checkpoint is {run.checkpoint}; --resume continues from it" if run.checkpoint
                    else "no checkpoint was written yet; run again with --overwrite to start afresh", run.main_process)
    with interrupts_ignored():  # the run is whole once these are written: a Ctrl-C could only cut it short
        save(run, args.max_steps, model, training_state(run, args.max_steps, optimizer, scheduler, masker))
        finish(run, result, unigram)


def train(run: Run, model, step_model, optimizer, scheduler, scaler, masker, valid: dict) -> dict:
    """Steps run.start + 1 to --max-steps: the step's seeded global batch from its phase, masked on
    the device, one train_step, the log line; every --eval-every steps a validation, every
    --save-every a checkpoint (the last step's is saved by main). Returns the last validation
    numbers and the token count and times (validation and checkpoints are kept out of tokens/s)."""
    args, device, vocab = run.args, run.device, run.vocab
    plan = phases(run)
    # the replacement pool is checked once here; every step then masks without reading a value back
    pool = check_replacement_pool(vocab.ordinary_tensor, vocab.special_ids, vocab.mask_id).to(device)
    read_every = 1 if device.type == "cpu" else args.log_every  # a GPU reads the loss back only to log it
    t0, tokens_seen, outside_s, last, losses = time.time(), 0, 0.0, None, {"train_loss": float("nan")}
    model.train()
    for step in range(run.start + 1, args.max_steps + 1):
        phase = [p for p in plan if p.first <= step][-1]
        rows = phase.rows(step, args.seed)                                 # (G,) on the CPU
        on_device = rows.to(device)
        ids, attn = phase.ids[on_device], phase.attention_mask[on_device]  # (G, T) each
        x, y, attn, _ = mask_batch(ids, attn, vocab.special_mask(ids), vocab.mask_id, pool, masker,
                                   args.mask_prob, check=False)
        batch = {"input_ids": x, "labels": y, "attention_mask": attn, "token_type_ids": phase.token_type_ids[on_device],
                 "next_sentence_label": phase.next_sentence_label[on_device],
                 "full": bool(phase.full_block[rows].all())}  # full: no block of it holds padding
        lr = optimizer.param_groups[0]["lr"]
        log_now = step % args.log_every == 0 or step == args.max_steps
        read = log_now or step % read_every == 0
        measured, grad_norm = train_step(run, model, step_model, optimizer, scaler, batch, phase, step, read)
        scheduler.step()
        losses = measured if read else losses
        tokens_seen += int(phase.real_per_block[rows].sum())
        if log_now:
            log(run, {"step": step, **losses, "seq_len": phase.seq_len, "lr": lr,
                      "grad_norm": float(grad_norm), "tokens_per_s": tokens_seen / (time.time() - t0 - outside_s)})
        t_outside = time.time()
        last = evaluate_and_save(run, model, step, valid, optimizer, scheduler, masker) or last
        outside_s += time.time() - t_outside
        if run.progress:
            run.progress.set_postfix(loss=f"{losses['train_loss']:.3f}",
                                     tok_s=f"{tokens_seen / (time.time() - t0 - outside_s):,.0f}",
                                     **({"val_acc": f"{last['valid_acc']:.3f}"} if last else {}))
            run.progress.update(1)
    if run.progress:
        run.progress.close()
    return {"last": last, "tokens_seen": tokens_seen, "wall_s": time.time() - t0, "outside_s": outside_s}


def train_step(run: Run, model, step_model, optimizer, scaler, batch: dict, phase: Phase, step: int,
               read_loss: bool) -> tuple[dict, torch.Tensor]:
    """One optimizer step on a masked global batch: forward and loss of each micro-batch, backward,
    clipping, the finite checks, the AdamW update. The loss is the mean over every target of the
    global batch, whatever the number of processes and micro-batches; with NSP, plus the mean
    next-sentence loss over the batch's pairs. Returns the training losses ({"train_loss": the MLM
    loss, and with pairs "train_nsp_loss", "train_nsp_acc"}; read from the device only when
    `read_loss`, else {}) and the gradient norm (a tensor)."""
    args, world, device = run.args, run.world, run.device
    is_target = batch["labels"] != IGNORE_INDEX              # (G, T): G = batch size x micro-batches x processes
    n_global = is_target.sum()
    nsp_labels = batch["next_sentence_label"]                # (G,): IGNORE_INDEX on blocks that are no pair
    n_pairs = (nsp_labels != IGNORE_INDEX).sum()
    sums = torch.zeros(3, dtype=torch.float64, device=device)  # MLM loss x targets, NSP loss, NSP correct
    rows = batch["input_ids"].shape[0] // (args.grad_accum * world)  # blocks per micro-batch and process
    for micro in range(args.grad_accum):
        part = slice((micro * world + run.rank) * rows, (micro * world + run.rank + 1) * rows)
        n_micro = is_target[part].sum()
        sync = micro == args.grad_accum - 1 or world == 1  # DDP averages gradients on the last micro-batch only
        with (contextlib.nullcontext() if sync else step_model.no_sync()), autocast(device, run.amp_dtype):
            if args.compile and device.type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()  # the last replay's outputs are done with
            # static shapes: the targets in P fixed slots per row, no attention mask where nothing is padding
            positions, slot_labels = target_slots(batch["labels"][part], phase.slots)   # (B, P) each
            mask = None if batch["full"] else batch["attention_mask"][part]
            out = step_model(batch["input_ids"][part], mask, batch["token_type_ids"][part], labels=slot_labels,
                             target_positions=positions)
            mlm_loss, _ = mlm_part(out)
            # this micro-batch's mean -> its share of the global batch's mean; DDP averages over processes
            loss = mlm_loss * (n_micro / n_global) * world
            if args.objective == "mlm+nsp":  # the same for the pairs' next-sentence loss (0 on the short phase)
                nsp_logits = out.seq_relationship_logits.float()                        # (B, 2)
                nsp_sum = F.cross_entropy(nsp_logits, nsp_labels[part], ignore_index=IGNORE_INDEX, reduction="sum")
                loss = loss + nsp_sum / n_pairs.clamp(min=1) * world
                sums[1:] += torch.stack([nsp_sum.detach(), (nsp_logits.argmax(-1) == nsp_labels[part]).sum()]).double()
        scaler.scale(loss).backward()
        sums[0] += mlm_loss.detach().double() * n_micro
    if world > 1:
        dist.all_reduce(sums)
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip if args.clip > 0 else float("inf"))
    losses = {}
    if read_loss:  # before the update; with fp16 the scaler itself skips steps with inf gradients
        losses["train_loss"] = train_loss = (sums[0] / n_global).item()
        if int(n_pairs):
            losses["train_nsp_loss"], losses["train_nsp_acc"] = (sums[1:] / n_pairs).tolist()
            train_loss += losses["train_nsp_loss"]
        if not math.isfinite(train_loss):
            stop_on_numbers(run, f"the training loss became {train_loss} at step {step}")
        if not scaler.is_enabled() and not math.isfinite(grad_norm):
            stop_on_numbers(run, f"the gradient norm became {float(grad_norm)} at step {step}")
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return losses, grad_norm


def mlm_part(out) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(MLM loss, MLM logits) of either model's output: BertForPreTraining names them as HF does."""
    return (out.mlm_loss, out.prediction_logits) if isinstance(out, PreTrainingOutput) else (out.loss, out.logits)


@torch.no_grad()
def evaluate(run: Run, model, valid: dict) -> dict:
    """MLM loss, perplexity and masked-token accuracy on the fixed masking of the validation
    split, in batches of --batch-size shared out among the processes; with NSP, its loss and
    accuracy on the held-out pairs too (`evaluate_nsp`)."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64)  # loss sum, targets, correct
    size = run.args.batch_size
    for i, lo in enumerate(range(0, len(valid["labels"]), size)):
        if i % run.world != run.rank:
            continue
        b = {k: v[lo:lo + size].to(run.device) for k, v in valid.items()}   # (B, T) each
        with autocast(run.device, run.amp_dtype):
            mlm_loss, logits = mlm_part(model(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                                              labels=b["labels"], masked_only=True))
        targets = b["labels"][b["labels"] != IGNORE_INDEX]
        n = targets.numel()
        totals += torch.tensor([mlm_loss.item() * n, n, (logits.argmax(-1) == targets).sum().item()],
                               dtype=torch.float64)
    if run.world > 1:
        dist.all_reduce(totals)
    loss = totals[0].item() / totals[1].item()
    result = {"valid_loss": loss, "valid_ppl": math.exp(min(loss, 50.0)),
              "valid_acc": totals[2].item() / totals[1].item()}
    if run.valid_pairs is not None:
        result |= evaluate_nsp(run, model)
    model.train()
    return result


@torch.no_grad()
def evaluate_nsp(run: Run, model) -> dict:
    """Next-sentence loss and accuracy on the fixed held-out pairs, and chance: the share of the
    commoner label (guessing it always)."""
    pairs, size = run.valid_pairs, run.args.batch_size
    totals = torch.zeros(2, dtype=torch.float64)  # loss sum, correct
    for i, lo in enumerate(range(0, len(pairs.next_sentence_label), size)):
        if i % run.world != run.rank:
            continue
        ids, types, attn = (getattr(pairs.blocks, k)[lo:lo + size].to(run.device)
                            for k in ("input_ids", "token_type_ids", "attention_mask"))   # (B, T) each
        labels = pairs.next_sentence_label[lo:lo + size].to(run.device)                  # (B,)
        with autocast(run.device, run.amp_dtype):
            logits = model(ids, attn, types).seq_relationship_logits.float()              # (B, 2)
        totals += torch.tensor([F.cross_entropy(logits, labels, reduction="sum").item(),
                                (logits.argmax(-1) == labels).sum().item()], dtype=torch.float64)
    if run.world > 1:
        dist.all_reduce(totals)
    n = len(pairs.next_sentence_label)
    commoner = max(int((pairs.next_sentence_label == 0).sum()), int((pairs.next_sentence_label == 1).sum()))
    return {"valid_nsp_loss": totals[0].item() / n, "valid_nsp_acc": totals[1].item() / n,
            "valid_nsp_pairs": n, "nsp_chance": commoner / n}


def evaluate_and_save(run: Run, model, step: int, valid: dict, optimizer, scheduler, masker) -> dict | None:
    """At --eval-every and --save-every steps (and the last): validate, stop a run that diverged,
    checkpoint (but the last step's, which main saves with the summary). Returns the validation
    numbers when they were measured."""
    args, last, final = run.args, None, step == run.args.max_steps
    if step % args.eval_every == 0 or final:
        last = evaluate(run, model, valid)
        log(run, {"step": step, **last})
        ceiling = math.log(run.config.vocab_size) + 1
        if last["valid_loss"] > ceiling:
            stop_on_numbers(run, f"the validation loss is {last['valid_loss']:.1f} at step {step}, more than ln V + 1 = "
                      f"{ceiling:.1f} (worse than guessing every token uniformly): the run diverged")
    if step % args.save_every == 0 and not final:
        save(run, step, model, training_state(run, step, optimizer, scheduler, masker))
    return last


# ---- before and after the loop ------------------------------------------------------------------


def unigram_baseline(run: Run, labels: torch.Tensor) -> tuple[str, float]:
    """(token, accuracy) of always guessing the most frequent ordinary training token."""
    blocks, vocab = run.train_blocks, run.vocab
    counts = torch.bincount(blocks.input_ids[blocks.attention_mask.bool()], minlength=max(vocab.special_ids) + 1)
    counts[list(vocab.special_ids)] = 0
    top = int(counts.argmax())
    return run.tokenizer.id_to_token(top), (labels[labels != IGNORE_INDEX] == top).float().mean().item()


def start_log(run: Run) -> None:
    """metrics.jsonl: new, or (resumed) cut back to the checkpoint's step."""
    def start():
        if run.main_process:
            try:
                if run.checkpoint:
                    truncate_metrics(run.metrics_path, run.start)
                else:
                    write_file(run.metrics_path, b"")
            except OSError as e:
                die(f"cannot write {run.metrics_path} ({e.strerror}); {write_advice(e, 'run again with --resume')}")

    main_first(start, run.rank, run.world)


def describe(run: Run, model) -> str:
    """The first line: the model, the data, the batches, the device."""
    args, config = run.args, run.config
    n_params = sum(p.numel() for p in model.parameters())
    return (f"minibert {args.objective.upper()}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
            f"{config.num_attention_heads} heads, vocab {config.vocab_size}, {n_params / 1e6:.2f}M parameters; "
            f"{len(run.train_blocks):,} training blocks of {args.seq_len} tokens"
            + (f" ({int((run.train_nsp >= 0).sum()):,} of them next-sentence pairs)"
               if run.train_nsp is not None else "")
            + f"; global batch {run.global_size}; "
            + (f"steps 1-{run.short_steps:,} on {len(run.short_blocks):,} blocks of {args.short_seq_len} tokens, "
               f"{short_global_size(args, run.global_size)} a batch; " if run.short_steps else "")
            + f"device {run.device}" + (f" x{run.world}" if run.world > 1 else "")
            + (f"; resumed at step {run.start} from {run.checkpoint}" if run.checkpoint else ""))


def finish(run: Run, result: dict, unigram: tuple[str, float]) -> None:
    """The summary (summary.json) and the report of the steps this process trained (at least
    one: a resume already at --max-steps ends before, nothing_to_train)."""
    summary_path = os.path.join(run.args.out, "summary.json")
    wall, outside, tokens = result["wall_s"], result["outside_s"], result["tokens_seen"]
    summary = {**result["last"], "unigram_baseline_acc": unigram[1], "unigram_token": unigram[0],
               "checkpoint": run.checkpoint, "steps": run.args.max_steps,
               "steps_this_run": run.args.max_steps - run.start, "wall_s": wall,
               "eval_and_checkpoint_s": outside, "tokens_per_s": tokens / (wall - outside)}

    def write_summary():
        if run.main_process:
            try:
                check_claimed(run.args.out)
                write_json(summary_path, summary)
            except OSError as e:
                stop(run, f"cannot write {summary_path} ({e.strerror})", write_advice(e, "--resume"))

    main_first(write_summary, run.rank, run.world)  # the others wait for it, and stop with it
    if run.main_process:
        report(summary, run.metrics_path)
    if run.lock:
        run.lock.close()  # releases --out for the next process
    if run.world > 1:
        finish_together()


def report(s: dict, metrics_path: str) -> None:
    print(f"checkpoint: {s['checkpoint']}")
    print(f"validation: loss {s['valid_loss']:.3f}, perplexity {s['valid_ppl']:.1f}, masked-token accuracy "
          f"{s['valid_acc']:.3f} (unigram baseline, always {s['unigram_token']!r}: {s['unigram_baseline_acc']:.3f})")
    if "valid_nsp_acc" in s:
        print(f"next sentence: accuracy {s['valid_nsp_acc']:.3f} on {s['valid_nsp_pairs']:,} held-out pairs "
              f"(chance {s['nsp_chance']:.3f}), loss {s['valid_nsp_loss']:.3f}")
    print(f"trained {s['steps_this_run']} steps in {s['wall_s'] / 60:.1f} min, {s['tokens_per_s']:,.0f} tokens/s")
    print(f"loss curves: python plot_metrics.py {metrics_path}")


if __name__ == "__main__":
    run_script(main, "nothing is half-written; --resume continues from the last checkpoint, if there is one")
