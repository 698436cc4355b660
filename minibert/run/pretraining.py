"""Pretraining's run machinery: what train_mlm.py needs around its loop, and nothing a reader of
the loop needs to follow one step.

- `start`: processes and device, the checks of the flags that need sizes, of --out (checked,
  not yet claimed) and of the data; the corpus prepared, tokenised and packed (a `Run`);
- `new_or_resumed_model`: a new model, or (--resume) the newest checkpoint that loads whole;
  the resume checks (flags that may not change, damaged checkpoints); then --out is claimed;
- `training_state` / `restore`: what is saved beside each checkpoint, and put back from it;
- `phases`: the short blocks first, then the --seq-len ones, and each step's seeded global batch;
- `stop`, `log`, `save`: what every process does together.

Steps are counted from 1: step N is the N-th optimizer update, and after it N updates are done
(a checkpoint `step-N` holds the weights after step N; a resume from it runs step N + 1 next).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from ..checkpoint import NotFiniteError, load_tokenizer, read_header, torch_load
from ..config import BertConfig
from ..files import append_line, not_a_file, read_bytes, sha256_of
from ..loss import IGNORE_INDEX
from ..masking import MaskingVocab, max_predictions
from ..model import BertForMaskedLM, BertForPreTraining
from ..pairs import Pairs, document_pairs, pack_pairs, pretraining_blocks
from ..text import Blocks
from . import die, first_line, interrupts_held, os_problem, write_advice
from .corpus import corpus_blocks, corpus_documents, corpus_tokenizer
from .folders import (SAVED_SHA256, HeldByHand, check_claimed, check_run_folder, checkpoints, claim_run_folder,
                      latest_checkpoint, metric_records, placed_by_hand, placed_by_hand_after, save_checkpoint, step_of)
from .training import (adamw, autocast_dtype, epoch_order, lr_factor, main_first, memory_of, parameter_count,
                       pick_device, use_tf32, weights_are_finite)

SHORT_SEQ_LEN = 16  # the longest default block of the short phase: a head's weight on each neighbour starts at 1/16
OBJECTIVES = {"mlm": BertForMaskedLM, "mlm+nsp": BertForPreTraining}  # --objective -> the model it trains
VALID_PAIR_SEEDS = range(4)  # the held-out next-sentence pairs: the validation documents cut four ways, in every run


@dataclass
class Run:
    """One pretraining run: the processes, the device, the data and what is known of --out. The
    model, its optimizer and their state are the training loop's own."""

    args: object                       # the parsed flags
    device: torch.device
    amp_dtype: torch.dtype | None      # autocast's dtype, None for fp32
    rank: int
    world: int                         # processes (1 without torchrun)
    corpus: str                        # the corpus's name (text files: a digest of their bytes)
    config: BertConfig
    tokenizer: object                  # tokenizers.Tokenizer
    vocab: MaskingVocab
    train_blocks: Blocks               # (S, seq_len) each
    valid_blocks: Blocks
    short_blocks: Blocks | None        # the training split in --short-seq-len blocks (None: one phase)
    train_nsp: torch.Tensor | None     # (S,) next-sentence labels of train_blocks (mlm+nsp); -100 on text blocks
    valid_pairs: Pairs | None          # the fixed held-out next-sentence pairs (mlm+nsp)
    inputs: tuple[str, ...]            # what --overwrite must never delete: the data cache, the corpus files
    lock: object | None = None         # the open lock file of --out (main process only), once claimed
    start: int = 0                     # steps done before this process starts (a resume's checkpoint step)
    short_steps: int = 0               # steps of the short first phase (a resume past it keeps it)
    checkpoint: str | None = None      # the last good checkpoint: resumed from, then each one written
    progress: object | None = None     # the tqdm bar of the main process

    @property
    def main_process(self) -> bool:
        return self.rank == 0

    @property
    def global_size(self) -> int:
        """Blocks of --seq-len tokens per optimizer step, over micro-batches and processes."""
        return self.args.batch_size * self.args.grad_accum * self.world

    @property
    def metrics_path(self) -> str:
        return os.path.join(self.args.out, "metrics.jsonl")


# ---- start: processes, checks, data ----------------------------------------------------------


def start(args, corpora: tuple[str, ...], prepare) -> Run:
    """Processes and device; then, the main process first (main_first: a refusal is one line,
    said by it alone), every check of the flags and of --out, and the data (the main process
    prepares and caches it, the others read the cache). `corpora` are the named corpora and
    `prepare(name, files, root)` returns a prepared corpus folder: data/prepare.py's, handed in
    by the script, since the package never imports the project's data module."""
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = pick_device(args.device)
    if ddp:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    return main_first(lambda: check_and_load(args, device, rank, world, corpora, prepare), rank, world)


def check_and_load(args, device: torch.device, rank: int, world: int, corpora, prepare) -> Run:
    """The number formats, the model's sizes, --out (main process) and the data, each checked."""
    amp_dtype = autocast_dtype(args.dtype, device)
    use_tf32(device, args.tf32)
    config = model_config(args)  # checks sizes and --seq-len before anything is written
    check_memory(config, device)
    name, files = corpus_name(args.corpus, corpora, args.data_root)
    root = args.data_root
    check_data_root(root)
    inputs = (root, *(files or ()))
    if rank == 0:
        check_run_folder(args.out, "pretraining", args.resume, args.overwrite, inputs)
    tokenizer, train, valid, short, train_nsp, valid_pairs = load_corpus(
        args, lambda: prepare(name, files, root), os.path.join(root, name), resumed_tokenizer(args))
    config = replace(config, vocab_size=tokenizer.get_vocab_size(), pad_token_id=tokenizer.token_to_id("[PAD]"))
    run = Run(args, device, amp_dtype, rank, world, name, config, tokenizer, MaskingVocab.from_tokenizer(tokenizer),
              train, valid, short, train_nsp, valid_pairs, inputs)
    splits = [(train, run.global_size)]
    if short is not None:  # one phase (--short-fraction 0) never reads --short-seq-len
        splits.append((short, short_global_size(args, run.global_size)))
    for blocks, size in splits:
        if len(blocks) < size:
            die(f"the training split has {len(blocks)} blocks of {blocks.input_ids.shape[1]} tokens, fewer than one "
                f"global batch ({size}); give more text or lower --batch-size")
    return run


def check_data_root(root: str) -> None:
    """A --data-root that is a link to nothing is said so, before the cache is made through it
    (which would fail naming a folder inside it as missing, and advise deleting that)."""
    if os.path.islink(root) and not os.path.exists(root):
        die(f"--data-root {root} is a link to {os.readlink(root)}, which does not exist: make that folder, or "
            "choose another --data-root")


def resumed_tokenizer(args):
    """On --resume, the tokenizer of the newest checkpoint whose tokenizer.json reads (None
    otherwise): a resumed run goes on with the tokenizer it was trained with, not one trained
    again. On a small text the WordPiece trainer of `tokenizers` breaks ties between equally
    frequent pieces in hash order, which varies from process to process, so a deleted or rebuilt
    cache may hold another. (check_resume still checks the corpus and --vocab-size.)"""
    for ckpt in reversed(checkpoints(args.out) if args.resume else []):
        try:
            tokenizer = load_tokenizer(ckpt)
        except Exception:  # damaged: resumable_checkpoint says so, or goes back to an earlier checkpoint
            continue
        return tokenizer
    return None


def load_corpus(args, prepare, cache: str, tokenizer=None):
    """(tokenizer, training blocks, validation blocks, short training blocks or None, next-sentence
    labels of the training blocks or None, held-out pairs or None) of the corpus `prepare()`
    prepares (its folder: `cache`), or one line saying what is wrong. The tokenizer is
    `tokenizer` when given (a resumed run's own), else the corpus's (trained once). MLM trains on the text packed
    into blocks; MLM + NSP on next-sentence pairs drawn from the documents with --seed, and the
    text in no pair packed after them (pairs.pretraining_blocks). Both are validated on the same
    packed validation text; the short phase reads packed text in either."""
    train_nsp = valid_pairs = None
    try:
        folder = prepare()
        tokenizer = tokenizer or corpus_tokenizer(folder, args.vocab_size)
        specials = [tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")]
        if args.objective == "mlm":
            train = corpus_blocks(folder, tokenizer, "train", args.seq_len)
        else:
            drawn = pretraining_blocks(corpus_documents(folder, tokenizer, "train"), args.seq_len, args.seed, *specials)
            train, train_nsp = drawn.blocks, drawn.next_sentence_label
            valid_documents = corpus_documents(folder, tokenizer, "valid")
            valid_pairs = pack_pairs([p for seed in VALID_PAIR_SEEDS
                                      for p in document_pairs(valid_documents, args.seq_len, seed)[0]],
                                     args.seq_len, *specials)
        valid = corpus_blocks(folder, tokenizer, "valid", args.seq_len)
        short = corpus_blocks(folder, tokenizer, "train", args.short_seq_len) if args.short_fraction else None
    except (RuntimeError, ValueError) as e:  # data/prepare.py's DataError is a RuntimeError
        die(str(e))
    except OSError as e:  # a full disk or a file-size limit while caching, a --data-root that is a file, ...
        die(f"the data cache {os_problem(e, cache, 'delete that folder to prepare it again')}")
    return tokenizer, train, valid, short, train_nsp, valid_pairs


def model_config(args) -> BertConfig:
    """The preset, its sizes overridden by --layers, --hidden, --heads, --intermediate."""
    try:
        config = BertConfig.from_preset(args.preset, vocab_size=args.vocab_size, use_sdpa=args.sdpa,
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


def corpus_name(corpus: list[str], corpora: tuple[str, ...], root: str) -> tuple[str, list[str] | None]:
    """(name, files): one of the named `corpora`, or text files named by a digest of their bytes.
    A name that `data/prepare.py --text` gave a text in `root` is no corpus of train_mlm.py's: said
    so, with what to give instead."""
    if len(corpus) == 1 and corpus[0] in corpora:
        return corpus[0], None
    for path in corpus:
        if not os.path.isfile(path):
            prepared = os.path.join(root, path)
            by_prepare = os.path.isfile(os.path.join(prepared, "manifest.json"))
            if len(corpus) == 1 and not os.path.lexists(path) and by_prepare:
                die(f"--corpus {path}: no such file; {prepared} is text data/prepare.py --text prepared, which "
                    "train_mlm.py does not read by its name: give the text files themselves (--corpus FILE ...)")
            what = "no such file" if not_a_file(path) == "missing" else not_a_file(path)
            die(f"--corpus {path}: {what} (use {', '.join(corpora)}, or text files)")
    digest = hashlib.sha256()
    for path in corpus:
        try:
            digest.update(read_bytes(path))
        except OSError as e:
            die(f"--corpus {path}: cannot read it ({e.strerror})")
    return "text-" + digest.hexdigest()[:12], corpus


# ---- the model: new, or resumed --------------------------------------------------------------

# flags a resumed run must keep: they decide the data, the model or the batches
FIXED_ON_RESUME = ("corpus", "objective", "vocab_size", "seq_len", "short_seq_len", "short_fraction", "preset",
                   "layers", "hidden", "heads", "intermediate", "seed", "mask_prob")
NOT_COMPARED = ("resume", "overwrite", "out", "data_root", "no_progress")
BEFORE_THE_FLAG = {"short_fraction": 0.0, "objective": "mlm"}  # what a run saved before a flag existed did


def new_or_resumed_model(run: Run) -> tuple[BertForMaskedLM | BertForPreTraining, dict | None]:
    """(model, training state): with --resume, the newest checkpoint in --out that loads whole
    (its state to restore); else, or when --out holds none yet, a new model drawn from --seed.
    Only once every process has passed every check is --out claimed (and, with --overwrite,
    emptied); a resumed run already at --max-steps is not claimed: nothing of it changes
    (at_max_steps)."""
    args = run.args

    def checked_model():
        if args.resume:
            run.checkpoint, model, state = resumable_checkpoint(run)
            if run.checkpoint is not None:
                return model, state
        torch.manual_seed(args.seed)
        try:
            return OBJECTIVES[args.objective](run.config), None
        except (RuntimeError, MemoryError) as e:
            die(f"cannot build the model ({first_line(e)}); choose smaller sizes")

    def claim():
        if run.main_process:
            run.lock = claim_run_folder(args.out, "pretraining", args.resume, args.overwrite, run.inputs)

    model, state = main_first(checked_model, run.rank, run.world)
    if not at_max_steps(run, state):
        main_first(claim, run.rank, run.world)
    return model, state


def at_max_steps(run: Run, state: dict | None) -> bool:
    """Whether a resumed run's checkpoint already stands at --max-steps: there is nothing to train."""
    return state is not None and state["step"] >= run.args.max_steps


def nothing_to_train(run: Run) -> None:
    """Say (main process) that a resumed run already stands at --max-steps, naming its own newest
    checkpoint: nothing is trained, nothing of the run is written (its old summary, of another
    process or of the folder it was copied from, is not said again as this one's)."""
    if run.main_process:
        print(f"nothing to train: {run.args.out} is at step {run.args.max_steps} of --max-steps {run.args.max_steps} "
              f"(its newest checkpoint: {run.checkpoint}); give a higher --max-steps to train on")
    if run.world > 1:
        dist.barrier()
        dist.destroy_process_group()


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


def resumable_checkpoint(run: Run):
    """(folder, model, training state) of the newest checkpoint in --out that loads whole, or
    (None, None, None) when there is none yet. A damaged checkpoint is skipped, with a one-line
    note once an earlier one loads (when none does, one line says why the newest did not); so is
    a folder holding what someone put there by hand, but a resume that would write such a folder
    again stops at once. Flags that may not change on a resume stop the run, the others are
    applied and said (by the main process)."""
    args, say = run.args, run.main_process
    found, skipped = checkpoints(args.out), []
    for ckpt in reversed(found):
        try:
            state = read_training_state(ckpt)
            saved_tokenizer = load_tokenizer(ckpt)
            model = OBJECTIVES[saved_flag(state["args"], "objective")].from_pretrained(
                ckpt, use_sdpa=args.sdpa, hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
            check_training_state(state, model, run.device, step_of(ckpt))
            problem = checkpoint_problem(ckpt, state)
        except NotFiniteError as e:
            problem = f"holds weights that are not finite ({', '.join(e.tensors[:3])})"
        except UnreadableState as e:
            problem = f"is damaged ({e})"
        except Exception as e:  # any file of it unreadable or unusable: the checkpoint is damaged
            held = placed_by_hand(ckpt)
            problem = held if held else f"is damaged ({type(e).__name__}: {first_line(e)})"
        if problem:
            skipped.append(f"{ckpt} {problem}")
            continue
        check_nothing_written_over(args.out, state["step"])
        for line in skipped if say else ():  # said once a checkpoint loads; if none does, the refusal says it
            print(f"note: {line}; skipped, resuming from an earlier checkpoint", file=sys.stderr)
        check_resume(run, ckpt, state, model, saved_tokenizer)
        if say:
            note_a_log_gap(args.out, state["step"], saved_flag(state["args"], "log_every"))
        changed = [f"--{k.replace('_', '-')} {v} -> {getattr(args, k)}" for k, v in sorted(state["args"].items())
                   if k not in FIXED_ON_RESUME + NOT_COMPARED and hasattr(args, k) and v != getattr(args, k)]
        if changed and say and state["step"] < args.max_steps:  # at --max-steps nothing is applied: nothing_to_train
            print(f"resume: {', '.join(changed)} (applied from step {state['step']} on)")
        return ckpt, model, state
    if found:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        die(f"no checkpoint in {os.path.join(args.out, 'checkpoints')} loads whole: {skipped[0]}{more}; put back "
            "what was changed, or start again with --overwrite, which deletes the run")
    check_checkpoints_left(args.out)
    check_nothing_written_over(args.out, 0)
    return None, None, None


def note_a_larger_vocabulary(run: Run) -> None:
    """A note when the tokenizer has more tokens than --vocab-size asked: WordPiece keeps the
    special tokens and every character of its text, whatever the size asked."""
    if run.config.vocab_size > run.args.vocab_size:
        print(f"note: the tokenizer has {run.config.vocab_size:,} tokens, more than --vocab-size "
              f"{run.args.vocab_size:,}: the 5 special tokens and every character of the text each need one",
              file=sys.stderr)


def note_a_log_gap(out: str, step: int, log_every: int) -> None:
    """A note when the run's metrics.jsonl lacks the records of the steps up to the checkpoint
    it resumes from (cut short or deleted by hand since): the run goes on, its log and plot with a
    gap. (Records are written every `log_every` steps, the flag as the checkpoint saved it.)"""
    path = os.path.join(out, "metrics.jsonl")
    try:
        last = max((r["step"] for r in metric_records(path) if r["step"] <= step), default=0)
    except FileNotFoundError:
        last = 0
    except OSError:  # no file there: said when the log is written
        return
    if type(log_every) is int and last < step - log_every:
        print(f"note: {path} holds no record of steps {last + 1}-{step} (cut short or deleted since the run wrote "
              f"them); the run goes on from step {step}, and its log and plot lack those steps", file=sys.stderr)


class UnreadableState(ValueError):
    """A checkpoint's training_state.pt that torch cannot read (cut short, garbled)."""


def read_training_state(ckpt: str) -> dict:
    """A checkpoint's training_state.pt (torch_load: tensors and plain data only); one that torch
    cannot read is an UnreadableState naming the file and torch's first sentence."""
    path = os.path.join(ckpt, "training_state.pt")
    raw = read_bytes(path)  # an OSError (missing, a folder) is said as it is
    try:
        return torch_load(raw)
    except Exception as e:  # torch raises many kinds: a cut zip, garbage, an object weights_only refuses
        raise UnreadableState(f"its training_state.pt cannot be read: {type(e).__name__}: "
                              f"{first_line(e).split('. ')[0]}") from None


def check_checkpoints_left(out: str) -> None:
    """Stop in one line if the run saved checkpoints and none is left (deleted by hand): starting
    again from step 0 would replace its metrics.jsonl, unsaid. save_checkpoint writes
    checkpoints/latest after each checkpoint, so a run killed before its first one has none,
    and starts over."""
    root = os.path.join(out, "checkpoints")
    if os.path.lexists(os.path.join(root, "latest")):
        die(f"--resume finds no checkpoint left in {root}; --overwrite starts the run again")


def check_nothing_written_over(out: str, step: int) -> None:
    """Stop in one line if training on from `step` would write a checkpoint folder again that
    holds a run or files put there by hand: said now, not after the training up to that step."""
    written_over = placed_by_hand_after(out, step)
    if written_over:
        die(f"--resume from step {step} would write the checkpoint folders after it again, and "
            f"{written_over[0]}; move it out, then --resume")


def check_resume(run: Run, ckpt: str, state: dict, model, saved_tokenizer) -> None:
    """Stop with one line if the checkpoint cannot continue under these flags: the corpus, the
    flags of FIXED_ON_RESUME, the global batch, the tokenizer, the sizes, or --max-steps below
    its step."""
    args, saved, step = run.args, state["args"], state["step"]
    same_corpus = state["corpus_name"] == run.corpus if "corpus_name" in state else saved.get("corpus") == args.corpus
    fixed = fixed_flags_changed(saved, args)
    if not same_corpus:
        then = state.get("corpus_name", " ".join(saved.get("corpus") or ()))
        fixed.insert(0, f"--corpus (its text: {then} then, {run.corpus} now)" if saved.get("corpus") == args.corpus
                     else f"--corpus ({' '.join(saved.get('corpus') or ())} then, {' '.join(args.corpus)} now)")
    if state.get("global_batch", run.global_size) != run.global_size:
        fixed.append(f"the global batch ({state['global_batch']} then, {run.global_size} now)")
    if fixed:
        die(f"--resume: {', '.join(fixed)} differ from the run in {args.out}; these decide its data, model or "
            "batches, so give the values it was started with, or start a new run in another --out")
    if saved_tokenizer.to_str() != run.tokenizer.to_str():
        die(f"the tokenizer in {ckpt} differs from the one for --corpus {' '.join(args.corpus)} "
            f"--vocab-size {args.vocab_size}; resume with the same data settings")
    sizes = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    if any(getattr(model.config, k) != getattr(run.config, k) for k in sizes):
        die(f"{ckpt} holds a model of other sizes than the one asked for; resume with the same model flags")
    if args.max_steps < step:
        die(f"--max-steps {args.max_steps} is below the step of the checkpoint in {args.out} ({step}); "
            f"give at least {step}")


def check_training_state(state: dict, model, device, folder_step: int) -> None:
    """Raise if a checkpoint's training state cannot be restored into `model`: it is loaded into
    a throwaway optimizer, schedule and generators first, so a bad one (a wrong type, a missing
    key, a step other than its folder's `folder_step`, AdamW moments missing or of another shape
    or dtype, a generator state of another size, any optimizer or schedule number that is not
    finite, a negative second moment, settings or step counts no run saves) is skipped like a
    damaged file, and nothing the run uses is changed. The step is checked first: every later
    check reads it, and would blame what it finds at the wrong step."""
    if type(state["step"]) is not int or state["step"] < 0:
        raise ValueError(f"step {state['step']!r} is not a step number")
    if state["step"] != folder_step:
        raise ValueError(f"its training state says step {state['step']}, not the step {folder_step} its folder is "
                         f"named for (a folder renamed? step {state['step']}'s is step-{state['step']:06d})")
    if not isinstance(state["args"], dict):
        raise ValueError("args is not a record of the flags")
    if "short_steps" in state and (type(state["short_steps"]) is not int or state["short_steps"] < 0):
        raise ValueError(f"short_steps {state['short_steps']!r} is not a number of steps")
    params = list(model.parameters())
    optimizer = adamw(params, 1.0, 0.0, fused=False)
    optimizer.load_state_dict(state["optimizer"])
    check_moments(state["optimizer"], optimizer)
    for p in params:
        squares = [optimizer.state[p][k] for k in ("exp_avg_sq", "max_exp_avg_sq") if k in optimizer.state[p]]
        if any(bool((v < 0).any()) for v in squares):
            raise ValueError("a negative second moment (AdamW's mean of squared gradients), which no step writes")
    for name in ("optimizer", "scheduler"):  # moments, step counts, rates, betas, eps, decay, the schedule's rates
        if not all_finite(state[name]):
            raise ValueError(f"a number in its {name} state that is not finite")
    check_optimizer_settings(optimizer, state["step"], state["scheduler"], state["args"])
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0).load_state_dict(dict(state["scheduler"]))
    torch.Generator(device=device).set_state(state["masker_rng"])
    torch.Generator().set_state(state["torch_rng"])
    if device.type == "cuda" and state["cuda_rng"] is not None:
        torch.Generator(device=device).set_state(state["cuda_rng"])


def check_moments(saved: dict, optimizer) -> None:
    """Raise unless the saved AdamW state (`saved`, as loaded into `optimizer`) holds, for every
    parameter, its step count and both moments, tensors of the parameter's shape and dtype.
    load_state_dict itself accepts a parameter without state (AdamW would start it afresh) and
    casts a moment of another dtype (float16: rounded), so the resumed run would silently not be
    the run continued."""
    for saved_group, group in zip(saved["param_groups"], optimizer.param_groups):
        for index, p in zip(saved_group["params"], group["params"]):
            moments = saved["state"].get(index, {})
            missing = [k for k in ("step", "exp_avg", "exp_avg_sq") if k not in moments]
            if missing:
                raise ValueError(f"AdamW's state of parameter {index} lacks {', '.join(missing)}")
            for k in ("exp_avg", "exp_avg_sq"):
                value = moments[k]
                if not torch.is_tensor(value) or (value.shape, value.dtype) != (p.shape, p.dtype):
                    kind = f"{tuple(value.shape)} {value.dtype}" if torch.is_tensor(value) else type(value).__name__
                    raise ValueError(f"AdamW's {k} of parameter {index} is {kind}, not the parameter's "
                                     f"{tuple(p.shape)} {p.dtype}")


def check_optimizer_settings(optimizer, step: int, scheduler: dict, saved: dict) -> None:
    """Raise if the restored AdamW or schedule cannot be the one train_mlm.py saved at `step`
    with the flags it saved: betas in [0, 1), eps above 0, rates and decay not negative, no
    gradient ascent; then exactly its settings (ADAMW_BETAS, ADAMW_EPS, no AMSGrad, --weight-decay
    on the matrices' group, the rate --lr and the schedule give at `step`), so a setting edited
    within its range is not resumed from silently; each parameter's step count and the
    schedule's equal to the checkpoint's step."""
    for group in optimizer.param_groups:
        b1, b2 = group["betas"]
        if not (0 <= b1 < 1 and 0 <= b2 < 1 and group["eps"] > 0 and group["lr"] >= 0 and group["weight_decay"] >= 0
                and not group["maximize"]):
            raise ValueError("an AdamW setting out of its range (betas in [0, 1), eps > 0, rate and decay >= 0, "
                             "no maximize)")
    lr, decay = saved_flag(saved, "lr"), saved_flag(saved, "weight_decay")
    max_steps = saved_flag(saved, "max_steps")
    warmup = warmup_length(saved_flag(saved, "warmup"), max_steps)
    rate = lr * lr_factor(step, max_steps, warmup, saved_flag(saved, "schedule"))
    for group, group_decay in zip(optimizer.param_groups, (decay, 0.0)):
        have = {"betas": tuple(group["betas"]), "eps": group["eps"], "amsgrad": group["amsgrad"],
                "weight_decay": group["weight_decay"], "initial_lr": group.get("initial_lr"), "lr": group["lr"]}
        want = {"betas": ADAMW_BETAS, "eps": ADAMW_EPS, "amsgrad": False, "weight_decay": group_decay,
                "initial_lr": lr, "lr": rate}
        edited = [f"{k} {have[k]} (not {want[k]})" for k in want if have[k] != want[k]]
        if edited:
            raise ValueError(f"AdamW's {', '.join(edited)}: not what train_mlm.py sets at step {step} for the flags "
                             "it saved (edited by hand?)")
    if scheduler.get("base_lrs") != [lr] * len(optimizer.param_groups):
        raise ValueError(f"the schedule's base rates {scheduler.get('base_lrs')} are not --lr {lr} (edited by hand?)")
    counts = {float(s["step"]) for s in optimizer.state.values() if "step" in s}
    if counts - {float(step)} or scheduler.get("last_epoch") != step or any(b <= 0 for b in scheduler["base_lrs"]):
        raise ValueError(f"AdamW's step counts {sorted(counts)} or the schedule's ({scheduler.get('last_epoch')!r}, "
                         f"base rates {scheduler['base_lrs']}) are not those of step {step}")


def all_finite(obj) -> bool:
    """Every number in `obj` (tensors, floats, nested in dicts, lists and tuples) is finite."""
    if torch.is_tensor(obj):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(all_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(all_finite(v) for v in obj)
    return True


def checkpoint_problem(ckpt: str, state: dict) -> str | None:
    """Why a checkpoint that loaded must still not be resumed from, or None: weights saved at
    another step than its training state's (files swapped), or weights or a config.json whose
    sha256 is not the one saved beside them (damaged or edited since: a flipped byte that still
    loads, another hidden_act; a checkpoint saved before a digest was recorded has none, and is
    not checked). Weights that are not finite do not load at all (checkpoint.load_state)."""
    weights, step = os.path.join(ckpt, "model.safetensors"), state["step"]
    saved = read_header(weights)[1].get("step")
    if saved is not None and saved != str(step):
        return f"holds the weights of step {saved} beside the training state of step {step}"
    for file, key in SAVED_SHA256.items():
        if key in state and state[key] != sha256_of(os.path.join(ckpt, file)):
            return (f"is damaged: its {file} is not the one it saved (its sha256 is not the one its training_state.pt "
                    "recorded)")
    return None


# ---- the training state beside each checkpoint -----------------------------------------------


def training_state(run: Run, step: int, optimizer, scheduler, masker: torch.Generator) -> dict:
    """What a resume needs besides the weights: the optimizer, the schedule, the generators, the
    flags, and what decided the batches (the global batch, the corpus, the short phase's end)."""
    return {"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "masker_rng": masker.get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(run.device) if run.device.type == "cuda" else None,
            "args": dict(vars(run.args)), "global_batch": run.global_size, "corpus_name": run.corpus,
            "short_steps": run.short_steps}


# AdamW with RoBERTa's betas (0.9, 0.98) and BERT's eps 1e-6 (BERT used beta2 0.999); decay on matrices only
ADAMW_BETAS, ADAMW_EPS = (0.9, 0.98), 1e-6


def warmup_length(warmup: float, max_steps: int) -> int:
    """The steps of the linear warm-up: the share --warmup of --max-steps, at least one."""
    return max(1, int(warmup * max_steps))


def restore(run: Run, state: dict, optimizer, scheduler, masker: torch.Generator, warmup_steps: int) -> None:
    """Optimizer, schedule and generators as the checkpoint left them; a changed --lr, --max-steps,
    --warmup, --schedule or --weight-decay takes effect from the resumed step on (--max-steps moves
    the end of the short phase only while the run is still in it)."""
    args = run.args
    optimizer.load_state_dict(state["optimizer"])
    for group in optimizer.param_groups:  # the kernel is this run's choice, not the checkpoint's
        group["fused"], group["foreach"] = (True, None) if args.fused_adamw else (None, True)
    scheduler.load_state_dict(state["scheduler"])
    masker.set_state(state["masker_rng"])
    run.start = state["step"]
    saved = state["args"]
    # a run past its short phase never goes back to it; one inside it ends it at --short-fraction of
    # the new --max-steps (a checkpoint older than the saved count: the phase its flags gave)
    fraction = saved_flag(saved, "short_fraction")
    ended = state.get("short_steps", round(fraction * saved["max_steps"])) if fraction else 0
    run.short_steps = ended if run.start >= ended else max(run.start, run.short_steps)
    if any(saved.get(k) != getattr(args, k) for k in ("lr", "max_steps", "warmup", "schedule", "weight_decay")):
        scheduler.base_lrs = [args.lr] * len(optimizer.param_groups)
        for group in optimizer.param_groups:
            group["initial_lr"] = args.lr
            group["lr"] = args.lr * lr_factor(run.start, args.max_steps, warmup_steps, args.schedule)
        optimizer.param_groups[0]["weight_decay"] = args.weight_decay  # the matrices' group
    if run.main_process:  # the RNG states saved are the main process's; the others reseed (dropout only)
        torch.set_rng_state(state["torch_rng"])
        if run.device.type == "cuda" and state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], run.device)
    else:
        torch.manual_seed(args.seed + 1000 * run.rank + run.start)


# ---- phases and batches ------------------------------------------------------------------------


@dataclass
class Phase:
    """Training blocks of one length, from step `first` (1-based) on: the text on the device,
    where it is masked, and the counts for tokens/s on the CPU."""

    first: int
    global_size: int                   # blocks per global batch: the same number of positions in each phase
    slots: int                         # target slots per block (max_predictions)
    ids: torch.Tensor                  # (S, T) on the device
    attention_mask: torch.Tensor       # (S, T) on the device
    token_type_ids: torch.Tensor       # (S, T) on the device
    next_sentence_label: torch.Tensor  # (S,) on the device: IGNORE_INDEX on every block that is no pair
    real_per_block: torch.Tensor       # (S,) on the CPU
    full_block: torch.Tensor           # (S,) on the CPU: no padding in the block

    @classmethod
    def of(cls, blocks: Blocks, first: int, global_size: int, mask_prob: float, device,
           next_sentence_label: torch.Tensor | None = None) -> "Phase":
        ids, attn, types = (t.to(device) for t in (blocks.input_ids, blocks.attention_mask, blocks.token_type_ids))
        if next_sentence_label is None:
            next_sentence_label = torch.full((len(blocks),), IGNORE_INDEX, dtype=torch.long)
        return cls(first, global_size, max_predictions(ids.shape[1], mask_prob), ids, attn, types,
                   next_sentence_label.to(device), blocks.attention_mask.sum(dim=1),
                   blocks.attention_mask.bool().all(dim=1))

    @property
    def seq_len(self) -> int:
        """Tokens per block of this phase."""
        return self.ids.shape[1]

    def rows(self, step: int, seed: int) -> torch.Tensor:
        """(G,) indices of the blocks of `step`: a seeded permutation per epoch of this phase."""
        epoch, index = divmod(step - self.first, len(self.ids) // self.global_size)
        return epoch_order(len(self.ids), seed, epoch)[index * self.global_size:(index + 1) * self.global_size]


def default_short_seq_len(seq_len: int) -> int:
    """--short-seq-len's default: the longest block of at least 5 tokens that divides --seq-len and
    is at most SHORT_SEQ_LEN tokens and a quarter of --seq-len (128 -> 16, 32 -> 8, 72 -> 12, 100 -> 10);
    where there is none, a quarter of --seq-len (68 -> 17), which train_mlm.py's checks then refuse."""
    limit = min(SHORT_SEQ_LEN, seq_len // 4)
    return max((d for d in range(5, limit + 1) if seq_len % d == 0), default=seq_len // 4)


def short_global_size(args, global_size: int) -> int:
    """Blocks per global batch in the short phase: seq-len / short-seq-len times --seq-len's, the same positions."""
    return global_size * (args.seq_len // args.short_seq_len)


def planned_short_steps(args) -> int:
    """Steps of the short first phase for these flags: --short-fraction of --max-steps, rounded, and
    at least one step fewer than --max-steps (the model is validated on --seq-len blocks)."""
    return min(round(args.short_fraction * args.max_steps), args.max_steps - 1)


def phases(run: Run) -> list[Phase]:
    """The short phase (steps 1 to run.short_steps, when this process still has steps of it to run),
    then the --seq-len blocks until --max-steps."""
    args, short = run.args, run.short_steps
    long = Phase.of(run.train_blocks, short + 1, run.global_size, args.mask_prob, run.device, run.train_nsp)
    if run.start >= short:
        return [long]
    size = short_global_size(args, run.global_size)
    return [Phase.of(run.short_blocks, 1, size, args.mask_prob, run.device), long]


# ---- what every process does together ------------------------------------------------------------


def stop(run: Run, reason: str, advice: str = "try a lower --lr, or --dtype fp32"):
    """End a run that cannot go on, naming the last good checkpoint: called by the main process,
    inside main_first (the others stop with it). Every process that meets the same all-reduced
    numbers calls stop_on_numbers instead."""
    if run.progress:
        run.progress.close()
    where = f"the last good checkpoint is {run.checkpoint}" if run.checkpoint else "no checkpoint was written"
    die(f"{reason}; stopping ({where}). {advice[:1].upper()}{advice[1:]}.")


def stop_on_numbers(run: Run, reason: str, advice: str = "try a lower --lr, or --dtype fp32"):
    """stop(), by every process on the same all-reduced numbers (a NaN loss): the main process
    says why, and the others stop with it."""
    main_first(lambda: stop(run, reason, advice), run.rank, run.world)


def log(run: Run, record: dict) -> None:
    """Append one line to metrics.jsonl (main process only; a failure stops every process)."""
    def append():
        if run.main_process:
            try:
                check_claimed(run.args.out)
                append_line(run.metrics_path, json.dumps(record))
            except OSError as e:
                stop(run, f"cannot append to {run.metrics_path} ({e.strerror})", write_advice(e, "--resume"))

    main_first(append, run.rank, run.world)


def save(run: Run, step: int, model, state: dict) -> None:
    """Checkpoint `step` (main process; only finite weights are ever called a good checkpoint)."""
    def write():
        if run.main_process:
            if not weights_are_finite(model):
                stop(run, f"the weights are no longer finite at step {step}")
            try:
                check_claimed(run.args.out)
                with interrupts_held():  # a Ctrl-C mid-save waits until the run knows its new checkpoint
                    run.checkpoint = save_checkpoint(run.args.out, step, model, run.tokenizer, state, run.args.keep)
            except OSError as e:
                why, placed = e.strerror, latest_checkpoint(run.args.out)
                if placed is not None and step_of(placed) == step:  # whole, in place: what failed came after it
                    why, run.checkpoint = f"{e.filename}: {e.strerror}", placed
                stop(run, f"cannot write the checkpoint of step {step} ({why})", write_advice(e, "--resume"))
            except HeldByHand as e:
                stop(run, f"cannot write the checkpoint of step {step}: {e}", "move it out, then --resume")

    main_first(write, run.rank, run.world)  # the others wait for it, and stop with it
