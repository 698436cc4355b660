"""Pretraining steps on one GPU, bf16: minibert vs transformers, eager and compiled, side by side.

    python -m bench.gpu                    # the three configurations below; a few minutes on an H200
    python -m bench.gpu --only bert-mini   # one of them
    python -m bench.gpu --device cpu --smoke   # a tiny model on a CPU: checks the code paths (the tests run it)

Configurations (preset, batch x length): bert-base 128 x 128, bert-base 256 x 128, and bert-mini
16 x 128, train_mlm.py's default. Both models are built from the same config and hold the same
weights; each step is forward, backward and fused AdamW under bf16 autocast with TF32 on, on the
same batches: full 128-token blocks (packed pretraining input: every position real, so no
attention mask is passed to either model) of random ids masked with mask_batch (15%). Token ids
do not change a dense model's speed, so the step needs no corpus.

Four rows per configuration:
- minibert eager: SDPA attention, the vocabulary projection at the masked positions only;
- minibert compiled: the static-shape step train_mlm.py --compile runs (targets gathered into
  max_predictions slots per row, one graph, fullgraph=True), in CUDA-graph mode (reduce-overhead);
- transformers eager and compiled (torch.compile's default mode): its defaults, SDPA and the
  dense MLM head.
Then, unless --no-train-mlm or the prepared corpus is missing (data/cache/en, which
`python data/prepare.py` writes: carry it to a GPU machine), train_mlm.py's own tokens/s at the
bert-mini and bert-base 128 x 128 configurations with --compile, read from its summary.json
(validation and checkpoints excluded).

Reports tokens/s, peak GPU memory and MFU: the FLOPs the step needs (bench/common.py's
useful_flops) over the step time, against the bf16 matmul throughput measured here on an 8192^3
product and against the datasheet peak (--peak-tflops, 989 for an H100/H200 SXM, dense bf16).
One JSON line at the end. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

from bench.common import hf_twin, useful_flops
from minibert import BertConfig, BertForMaskedLM, mask_batch
from minibert.files import parse_json
from minibert.masking import max_predictions, target_slots
from minibert.run import die
from minibert.run.flags import AT_LEAST_0, AT_LEAST_1, POSITIVE, add_device, check_ranges
from minibert.run.training import pick_device, use_tf32

CLS, SEP, MASK = 101, 102, 103  # the uncased BERT vocabulary's ids
CONFIGS = {"bert-base-128": ("bert-base", 128, 128), "bert-base-256": ("bert-base", 256, 128),
           "bert-mini": ("bert-mini", 16, 128)}


def packed_random_batches(n: int, batch_size: int, seq_len: int, vocab_size: int, device):
    g = torch.Generator().manual_seed(0)
    low = min(999, vocab_size // 2)  # the uncased vocabulary's specials and unused ids lie below 999
    ordinary = torch.arange(low, vocab_size)
    out = []
    for _ in range(n):
        ids = torch.randint(low, vocab_size, (batch_size, seq_len), generator=g)
        ids[:, 0], ids[:, seq_len // 2], ids[:, -1] = CLS, SEP, SEP
        special = (ids == CLS) | (ids == SEP)
        x, y, att, _ = mask_batch(ids, torch.ones_like(ids), special, MASK, ordinary, g)
        positions, slot_labels = target_slots(y, max_predictions(seq_len))
        out.append(tuple(t.to(device) for t in (x, att, y, positions, slot_labels)))
    return out


def timed(fn, repeats: int, device: torch.device) -> list[float]:
    """Seconds per call: CUDA events on a GPU, the wall clock elsewhere."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return times


def bf16_matmul_flops_per_s(device: torch.device, n: int = 8192) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    timed(lambda: a @ b, 3, device)
    return 2 * n ** 3 / statistics.median(timed(lambda: a @ b, 10, device))


def step_rows(config, ours, hf, batches, args, device) -> dict:
    """The four rows of one configuration: {name: {median_s, tokens_per_s, peak_memory_gib}}."""
    backend = "aot_eager" if args.smoke else "inductor"
    cuda_graphs = "reduce-overhead" if device.type == "cuda" else None
    variants = {
        "minibert eager": (ours, lambda m, b: m(b[0], None, labels=b[2], masked_only=True).loss),
        "minibert compiled": (ours, lambda m, b: m(b[0], None, labels=b[4], target_positions=b[3]).loss),
        "transformers eager": (hf, lambda m, b: m(input_ids=b[0], labels=b[2]).loss),
        "transformers compiled": (hf, lambda m, b: m(input_ids=b[0], labels=b[2]).loss),
    }
    rows = {}
    for name, (model, forward) in variants.items():
        torch._dynamo.reset()
        model.to(device).train()
        if name == "minibert compiled":
            run = torch.compile(model, backend=backend, fullgraph=True, dynamic=False,
                                **({"mode": cuda_graphs} if backend == "inductor" and cuda_graphs else {}))
        elif name == "transformers compiled":
            run = torch.compile(model, backend=backend)
        else:
            run = model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        it = iter(batches)

        def step():
            if device.type == "cuda" and run is not model:
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = forward(run, next(it))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        timed(step, args.warmup, device)
        median = statistics.median(timed(step, args.steps, device))
        rows[name] = {"median_s": median, "tokens_per_s": batches[0][0].numel() / median,
                      "peak_memory_gib": torch.cuda.max_memory_allocated() / 2 ** 30 if device.type == "cuda" else None}
        model.cpu()
        opt = None  # frees the optimizer state before the next row
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def train_mlm_tokens_per_s(preset: str, batch_size: int, steps: int) -> float | None:
    """train_mlm.py --compile at this configuration, as a separate process: its own tokens/s."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "data", "cache", "en", "manifest.json")):
        return None
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, os.path.join(root, "train_mlm.py"), "--preset", preset, "--batch-size", str(batch_size),
               "--max-steps", str(steps), "--compile", "--out", out, "--overwrite", "--no-progress",
               "--eval-every", str(steps), "--save-every", str(steps), "--log-every", "50"]
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"  train_mlm.py failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        with open(os.path.join(out, "summary.json"), "rb") as f:
            return parse_json(f.read())["tokens_per_s"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=sorted(CONFIGS), help="one configuration (default: all three)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per row (default: 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first, compilation included (default: 5)")
    p.add_argument("--train-mlm-steps", type=int, default=300, help="steps of each train_mlm.py run (default: 300)")
    p.add_argument("--no-train-mlm", action="store_true", help="skip the train_mlm.py runs")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="datasheet dense bf16 peak (default: 989)")
    add_device(p, default="cuda")
    p.add_argument("--smoke", action="store_true",
                   help="a 2-layer, 64-wide model, 4 x 32, 2 steps, compiled with aot_eager: checks the code, "
                        "measures nothing")
    args = p.parse_args(argv)
    check_ranges(p, args, {"steps": AT_LEAST_1, "warmup": AT_LEAST_0, "train_mlm_steps": AT_LEAST_1,
                           "peak_tflops": POSITIVE})
    if args.device == "mps" or (args.device != "cpu" and not torch.cuda.is_available()):
        die("python -m bench.gpu times a CUDA GPU (--device cpu --smoke only checks its code); "
            "on a CPU run python -m bench.pretrain_step")
    device = pick_device(args.device)
    use_tf32(device, True)
    if args.smoke:
        configs = {"smoke": ("bert-tiny", 4, 32)}
        args.steps, args.warmup, args.no_train_mlm = 2, 1, True
    else:
        configs = {k: v for k, v in CONFIGS.items() if args.only in (None, k)}
    measured = bf16_matmul_flops_per_s(device, 256 if args.smoke else 8192)
    report = {}
    print(f"pretraining steps, bf16 autocast, packed blocks; {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}; measured bf16 matmul "
          f"{measured / 1e12:.1f} TFLOP/s, datasheet {args.peak_tflops:.0f}")
    for key, (preset, batch_size, seq_len) in configs.items():
        torch.manual_seed(0)
        config = BertConfig.from_preset(preset, use_sdpa=True,
                                        **({"vocab_size": 2000, "hidden_size": 64, "intermediate_size": 256}
                                           if args.smoke else {}))
        ours = BertForMaskedLM(config)
        hf = hf_twin(ours, config)
        batches = packed_random_batches(args.warmup + args.steps, batch_size, seq_len, config.vocab_size, device)
        flops = statistics.mean(useful_flops(config, b[1], b[2]) for b in batches)
        rows = step_rows(config, ours, hf, batches, args, device)
        for r in rows.values():
            r["mfu_measured"] = flops / r["median_s"] / measured
            r["mfu_datasheet"] = flops / r["median_s"] / (args.peak_tflops * 1e12)
        best_hf = max(rows["transformers eager"]["tokens_per_s"], rows["transformers compiled"]["tokens_per_s"])
        ratio = rows["minibert compiled"]["tokens_per_s"] / best_hf
        own = None if args.no_train_mlm or key == "bert-base-256" else \
            train_mlm_tokens_per_s(preset, batch_size, args.train_mlm_steps)
        print(f"\n{key}: {preset}, batch {batch_size} x {seq_len}; useful work {flops / 1e12:.3f} TFLOP/step")
        for name, r in rows.items():
            memory = f"  peak memory {r['peak_memory_gib']:.1f} GiB" if r["peak_memory_gib"] is not None else ""
            print(f"  {name:22s} {r['median_s'] * 1000:8.2f} ms/step {r['tokens_per_s']:12,.0f} tokens/s  "
                  f"MFU {r['mfu_measured']:.0%} of measured, {r['mfu_datasheet']:.0%} of datasheet{memory}")
        print(f"  minibert compiled / transformers' best: {ratio:.2f}x")
        if own is not None:
            print(f"  train_mlm.py --compile, same configuration: {own:,.0f} tokens/s "
                  f"({own / rows['minibert compiled']['tokens_per_s']:.0%} of the bench's compiled step)")
        report[key] = {"preset": preset, "batch_size": batch_size, "seq_len": seq_len, "useful_flops_per_step": flops,
                       "rows": rows, "ratio_compiled_vs_best_transformers": ratio, "train_mlm_tokens_per_s": own}
    print(json.dumps({"bench": "gpu", "device": device.type, "smoke": args.smoke, "bf16_matmul_flops_per_s": measured,
                      "configs": report, "torch": torch.__version__, "transformers": transformers.__version__}))
    return report


if __name__ == "__main__":
    main()
