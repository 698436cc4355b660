"""One MLM pretraining step (forward, backward, AdamW), minibert vs transformers, side by side.

    python -m bench.pretrain_step --preset bert-mini
    python -m bench.pretrain_step --preset bert-medium
    python -m bench.pretrain_step --preset bert-medium --input packed     # train_mlm.py's input
    python -m bench.pretrain_step --preset bert-mini --dtype bf16         # autocast, both sides

Both models are built from the same config and hold the same weights; both get the same
batches of real text, tokenised with the uncased BERT vocabulary (30,522 words) and masked once
with mask_batch: `--input padded` (default) takes sentences cut at --seq-len and padded to it
(~27% real tokens), `--input packed` full 128-token blocks as train_mlm.py makes them. Both use
the same optimizer, PyTorch's fused AdamW. minibert runs its fast settings (SDPA attention,
padding removed before the encoder, the vocabulary projection at the masked positions only);
transformers runs its defaults (SDPA attention, the dense MLM head).

Tokens/s counts real (non-padding) tokens. MFU is the FLOPs the step really needs (below)
divided by the step time and by this machine's matmul throughput in the step's dtype (fp32, or
bf16 with --dtype bf16), measured in the same run on a matrix product of the model's own
feed-forward shape. Prints a short table and one
JSON line. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import torch
import transformers

from bench.common import hf_twin, matmul_flops_per_s, real_batches, useful_flops
from minibert import BertConfig, BertForMaskedLM
from minibert.masking import max_predictions, target_slots


def adamw_step_ms(model: torch.nn.Module, repeats: int = 8) -> dict[str, float]:
    """Median ms of one AdamW update of all of `model`'s parameters (random gradients), with
    PyTorch's foreach and fused kernels: the optimizer's share of a step."""
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    for p in params:
        p.grad = torch.randn_like(p)
    out = {}
    for kernel in ("foreach", "fused"):
        opt = torch.optim.AdamW(params, lr=1e-4, **{kernel: True})
        opt.step()  # the first step allocates the optimizer state
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t)
        out[kernel] = 1000 * statistics.median(times)
    return out


def time_steps(step, batches, warmup: int) -> list[float]:
    times = []
    for i, batch in enumerate(batches):
        t = time.perf_counter()
        step(*batch)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="bert-mini", help="bert-mini (default) or another preset")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--input", choices=["padded", "packed"], default="padded",
                   help="padded sentences (default) or packed blocks")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="autocast dtype, both sides")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile both models first; minibert then runs train_mlm.py --compile's static step")
    p.add_argument("--steps", type=int, default=12, help="timed steps per implementation (default: 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: 3)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    config = BertConfig.from_preset(args.preset, use_sdpa=True, unpad=True)
    ours = BertForMaskedLM(config)
    hf = hf_twin(ours, config)
    batches = real_batches(args.warmup + args.steps, args.batch_size, args.seq_len, packed=args.input == "packed")
    timed = batches[args.warmup:]
    tokens = statistics.mean(int(att.sum()) for _, att, _ in timed)
    flops = statistics.mean(useful_flops(config, att, y) for _, att, y in timed)

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16" else contextlib.nullcontext()

    def stepper(model, forward, fullgraph=False):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        run = torch.compile(model, fullgraph=fullgraph, dynamic=False) if args.compile else model

        def step(x, att, y):
            with autocast():
                loss = forward(run, x, att, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    slots = max_predictions(args.seq_len)
    packed = args.input == "packed"

    def static_step(m, x, a, y):
        """train_mlm.py --compile's step: the targets in fixed slots, no mask for packed blocks."""
        positions, slot_labels = target_slots(y, slots)
        return m(x, None if packed else a, labels=slot_labels, target_positions=positions).loss

    results = {}
    for name, model, forward in (
            ("minibert", ours, static_step if args.compile else
             (lambda m, x, a, y: m(x, a, labels=y, masked_only=True).loss)),
            ("transformers", hf, lambda m, x, a, y: m(input_ids=x, attention_mask=a, labels=y).loss)):
        model.train()
        times = time_steps(stepper(model, forward, fullgraph=args.compile and packed and model is ours),
                           batches, args.warmup)
        median = statistics.median(times)
        results[name] = {"median_s": median, "tokens_per_s": tokens / median}
    matmul_dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    peak = matmul_flops_per_s(args.batch_size * args.seq_len, config.hidden_size, config.intermediate_size,
                              matmul_dtype)
    for r in results.values():
        r["mfu"] = flops / r["median_s"] / peak
    adamw = adamw_step_ms(ours)
    ratio = results["minibert"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    print(f"pretraining step, {args.preset} ({config.num_hidden_layers}/{config.hidden_size}/"
          f"{config.num_attention_heads}, vocab {config.vocab_size}), batch {args.batch_size} x {args.seq_len} "
          f"{args.input}, {tokens:.0f} real tokens per batch, {args.dtype}{', compiled' if args.compile else ''}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"  useful work {flops / 1e9:.1f} GFLOP/step; measured {args.dtype} matmul throughput {peak / 1e9:.0f} GFLOP/s")
    for name, r in results.items():
        print(f"  {name:13s} {r['median_s'] * 1000:8.1f} ms/step  {r['tokens_per_s']:9,.0f} tokens/s  "
              f"MFU {r['mfu']:.0%}")
    print(f"  ratio minibert / transformers: {ratio:.2f}x")
    print(f"  AdamW update alone: foreach {adamw['foreach']:.1f} ms, fused {adamw['fused']:.1f} ms (both sides use fused)")
    print(json.dumps({"bench": "pretrain_step", "adamw_ms": adamw, "preset": args.preset, "batch_size": args.batch_size,
                      "seq_len": args.seq_len, "input": args.input, "dtype": args.dtype, "compile": args.compile,
                      "real_tokens_per_batch": tokens, "useful_flops_per_step": flops,
                      "matmul_flops_per_s": peak, **{
                          f"{k}_{m}": v for k, r in results.items() for m, v in r.items()},
                      "ratio": ratio, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
