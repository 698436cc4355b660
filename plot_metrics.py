"""Plot training and validation loss from a train_mlm.py metrics file (needs matplotlib).

    python plot_metrics.py runs/mlm-en/metrics.jsonl [--out runs/mlm-en/loss.png]
"""

import argparse
import json
import os


def plot_metrics(metrics_path: str, out_path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, valid = [], []
    with open(metrics_path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "train_loss" in r:
                train.append((r["step"], r["train_loss"]))
            if "valid_loss" in r:
                valid.append((r["step"], r["valid_loss"]))
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    if train:
        ax.plot(*zip(*train), label="training loss (masked tokens of the step)")
    if valid:
        ax.plot(*zip(*valid), "o-", label="validation loss (fixed masking)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("MLM cross-entropy (nats)")
    ax.set_title(os.path.basename(os.path.dirname(os.path.abspath(metrics_path))))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    return out_path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", help="metrics.jsonl written by train_mlm.py")
    p.add_argument("--out", help="PNG to write (default: loss.png beside the metrics file)")
    args = p.parse_args()
    out = args.out or os.path.join(os.path.dirname(args.metrics), "loss.png")
    print(plot_metrics(args.metrics, out))


if __name__ == "__main__":
    main()
