"""bert-base pretraining steps on one GPU, bf16: minibert vs transformers, side by side.

    python -m bench.gpu                # about 2 minutes on an H200
    python -m bench.gpu --compile      # torch.compile both models first (adds compile time)

Both models are built from the bert-base config (12/768/12, vocab 30,522) and hold the same
weights; each step is forward, backward and fused AdamW under bf16 autocast with TF32 on, on
the same batches: full 128-token blocks (packed pretraining input: every position real) of
random token ids, masked with mask_batch (15%). Token ids do not change a dense model's speed,
so no corpus is needed on the GPU machine: the script runs with torch, einops, tokenizers,
safetensors and transformers alone. minibert runs SDPA attention and the vocabulary projection
at the masked positions only; transformers runs its defaults (SDPA, dense MLM head).

Reports tokens/s, peak GPU memory (torch.cuda.max_memory_allocated) and MFU: the FLOPs the
step needs (bench/common.py's useful_flops) over the step time, against the bf16 matmul
throughput measured here on an 8192^3 product and against the chip's datasheet peak (--peak-tflops,
989 for an H100/H200 SXM, dense bf16). One JSON line at the end. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import transformers

from bench.common import hf_twin, useful_flops
from minibert import BertConfig, BertForMaskedLM, mask_batch
from minibert.training import die, use_tf32

CLS, SEP, MASK = 101, 102, 103  # the uncased BERT vocabulary's ids


def packed_random_batches(n: int, batch_size: int, seq_len: int, vocab_size: int, device):
    g = torch.Generator().manual_seed(0)
    ordinary = torch.arange(999, vocab_size)  # the uncased vocabulary's specials and unused ids lie below 999
    out = []
    for _ in range(n):
        ids = torch.randint(999, vocab_size, (batch_size, seq_len), generator=g)
        ids[:, 0], ids[:, seq_len // 2], ids[:, -1] = CLS, SEP, SEP
        special = (ids == CLS) | (ids == SEP)
        x, y, att, _ = mask_batch(ids, torch.ones_like(ids), special, MASK, ordinary, g)
        out.append((x.to(device), att.to(device), y.to(device)))
    return out


def cuda_time(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return times


def bf16_matmul_flops_per_s(n: int = 8192) -> float:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    cuda_time(lambda: a @ b, 3)
    return 2 * n ** 3 / statistics.median(cuda_time(lambda: a @ b, 10))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="bert-base")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=30, help="timed steps per implementation (default: 30)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default: 5)")
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="datasheet dense bf16 peak (default: 989)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        die("python -m bench.gpu needs a CUDA GPU; on a CPU run python -m bench.pretrain_step")
    use_tf32(torch.device("cuda"), True)
    torch.manual_seed(0)
    config = BertConfig.from_preset(args.preset, use_sdpa=True)
    ours = BertForMaskedLM(config)
    hf = hf_twin(ours, config)
    batches = packed_random_batches(args.warmup + args.steps, args.batch_size, args.seq_len,
                                    config.vocab_size, "cuda")
    flops = statistics.mean(useful_flops(config, att, y) for _, att, y in batches)
    tokens = args.batch_size * args.seq_len
    results = {}
    for name, model, forward in (
            ("minibert", ours, lambda m, x, a, y: m(x, a, labels=y, masked_only=True).loss),
            ("transformers", hf, lambda m, x, a, y: m(input_ids=x, attention_mask=a, labels=y).loss)):
        model.cuda().train()
        run = torch.compile(model) if args.compile else model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        it = iter(batches)

        def step():
            x, att, y = next(it)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = forward(run, x, att, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        torch.cuda.reset_peak_memory_stats()
        cuda_time(step, args.warmup)
        median = statistics.median(cuda_time(step, args.steps))
        results[name] = {"median_s": median, "tokens_per_s": tokens / median,
                         "peak_memory_gib": torch.cuda.max_memory_allocated() / 2 ** 30}
        model.cpu()
        del opt
        torch.cuda.empty_cache()
    measured = bf16_matmul_flops_per_s()
    for r in results.values():
        r["mfu_measured"] = flops / r["median_s"] / measured
        r["mfu_datasheet"] = flops / r["median_s"] / (args.peak_tflops * 1e12)
    ratio = results["minibert"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    print(f"pretraining step, {args.preset}, batch {args.batch_size} x {args.seq_len} packed, bf16 autocast"
          f"{', compiled' if args.compile else ''}; {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    print(f"  useful work {flops / 1e12:.2f} TFLOP/step; measured bf16 matmul {measured / 1e12:.0f} TFLOP/s, "
          f"datasheet {args.peak_tflops:.0f}")
    for name, r in results.items():
        print(f"  {name:13s} {r['median_s'] * 1000:7.1f} ms/step {r['tokens_per_s']:11,.0f} tokens/s  "
              f"MFU {r['mfu_measured']:.0%} of measured, {r['mfu_datasheet']:.0%} of datasheet  "
              f"peak memory {r['peak_memory_gib']:.1f} GiB")
    print(f"  ratio minibert / transformers: {ratio:.2f}x")
    print(json.dumps({"bench": "gpu", "preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
                      "compile": args.compile, "device": torch.cuda.get_device_name(),
                      "useful_flops_per_step": flops, "bf16_matmul_flops_per_s": measured,
                      **{f"{k}_{m}": v for k, r in results.items() for m, v in r.items()}, "ratio": ratio,
                      "torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
