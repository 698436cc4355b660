"""What every training script needs, written once: the device and its number formats, AdamW
with one weight-decay rule, the learning-rate schedule, the seeded data order, and how several
processes stop together.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys

import torch
import torch.distributed as dist

from . import die

# ---- device and number formats --------------------------------------------------------------


def pick_device(name: str = "auto") -> torch.device:
    """auto: a CUDA GPU, else Apple's MPS, else the CPU. A device that is asked for but absent
    stops the script with one line."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        die("--device cuda, but torch sees no CUDA GPU")
    if name == "mps" and not torch.backends.mps.is_available():
        die("--device mps, but this torch has no MPS backend")
    return torch.device(name)


def use_tf32(device: torch.device, enabled: bool) -> None:
    """On a CUDA GPU, fp32 matrix products on the tensor cores in TF32 (10-bit mantissa); no
    effect elsewhere."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled


def autocast_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """auto: bf16 on a GPU that has it, else fp32 (None: no autocast)."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    if name == "fp16" and device.type == "cpu":
        die("--dtype fp16 autocast is for GPUs; on a CPU use bf16 (fast where it has bf16 matrix "
            "units, e.g. AMX) or fp32")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def autocast(device: torch.device, dtype: torch.dtype | None):
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type=device.type, dtype=dtype)


# ---- optimisation ---------------------------------------------------------------------------


def adamw(params, lr: float, weight_decay: float, fused: bool = True,
          betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> torch.optim.AdamW:
    """AdamW over the parameters that require a gradient, with one decay rule: matrices and
    embeddings (dim >= 2, LoRA's A and B included) decay; biases and LayerNorm never do.
    fused=True: PyTorch's fused kernel (the same update as the multi-tensor `foreach` one)."""
    trainable = [p for p in params if p.requires_grad]
    groups = [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}]
    kernel = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, **kernel)


def lr_factor(done: int, total: int, warmup: int, schedule: str = "linear") -> float:
    """Multiplier of the peak rate for the step after `done` updates (LambdaLR's count: 0 for the
    first step): linear warm-up from 1/warmup to 1 over `warmup` steps, then linear or cosine
    decay to 0 at `total`."""
    if done < warmup:
        return (done + 1) / warmup
    progress = (done - warmup) / max(1, total - warmup)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def finetuning_optimizer(params, lr: float, total_steps: int, weight_decay: float = 0.01,
                         fused: bool = True) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """Fine-tuning's AdamW (PyTorch's betas (0.9, 0.999) and eps 1e-8; pretraining uses
    RoBERTa's (0.9, 0.98) and 1e-6) and its schedule: linear warm-up over the first 10% of `total_steps`,
    then linear decay to 0."""
    optimizer = adamw(params, lr, weight_decay, fused)
    warmup = max(1, int(0.1 * total_steps))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: lr_factor(done, total_steps, warmup))


def update(loss: torch.Tensor, params: list, optimizer, scheduler, clip: float = 1.0) -> None:
    """One fine-tuning update: backward, the gradient norm of `params` clipped to `clip`, the
    optimizer step, gradients cleared, the schedule advanced."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The seeded order of n examples in one epoch: (n,) indices, the same on every machine."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(1000 * seed + epoch))


def weights_are_finite(model) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def parameter_count(config) -> int:
    """The parameters of BertForMaskedLM(config), counted from the sizes, before anything is built:
    embeddings V*C + P*C + T*C and their LayerNorm 2C; per layer 4 projections (4C^2 + 4C), the
    feed-forward (2CI + I + C) and two LayerNorms (4C); the MLM head's transform (C^2 + 3C) and
    output bias V (its matrix is the word embeddings)."""
    C, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * C + 2 * C
    layer = 4 * C * C + 4 * C + 2 * C * I + I + C + 4 * C
    return embeddings + L * layer + C * C + 3 * C + config.vocab_size


def memory_of(device: torch.device) -> int | None:
    """The bytes of memory of `device` (a GPU's own, else the machine's), or None where unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# ---- several processes ----------------------------------------------------------------------


def main_first(work, rank: int, world: int):
    """`work()` on the main process (rank 0), then on the others; returns its result. A stop
    (`die`) in it stops every process with ONE line: the main process's, said before the others
    start (so they neither repeat a check's line nor wait at a collective for a process that is
    gone), else that of the first other process that stopped; the rest exit quietly, together
    with it (stop_together). A single process just runs `work()`."""
    if world == 1:
        return work()
    result, stopped = None, None
    for my_turn in (rank == 0, rank > 0):  # the main process's turn, then the others'
        if my_turn:
            try:
                result = work()
            except SystemExit as e:
                stopped = e
        said = [None] * world
        dist.all_gather_object(said, stopped is not None)
        if any(said):
            stop_together(stopped if rank == said.index(True) else SystemExit(1))
    return result


def finish_together():
    """End every process of a finished run at once: together (a process that leaves first would
    break its peer's connection), out of the process group, then without Python's exit, where
    gloo's threads could still abort ("terminate called without an active exception"); every
    file is written whole by then."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def stop_together(stopped: SystemExit):
    """Stop every process of a run at once. The process with a line to say says it first, before
    any process exits: torchrun ends the others as soon as one has exited, which could cut that
    line. Then all leave the process group together, since one left to Python's exit can abort
    in gloo's threads ("terminate called without an active exception")."""
    said = isinstance(stopped.code, str)
    if said:
        print(stopped.code, file=sys.stderr, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    raise SystemExit(1 if said else stopped.code)
