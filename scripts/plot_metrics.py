#!/usr/bin/env python3
"""Plots the CSV that `mnist_train --metrics FILE`, `resnet --metrics FILE`, `gpt_train --metrics FILE` or
`char_lstm --metrics FILE` writes.

Usage: plot_metrics.py METRICS_CSV [-o OUT_PNG] [--title TEXT]

gpt_train's and char_lstm's CSV has the header iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s (train rows per
evaluation interval with its speed, val rows with the evaluation loss); its PNG shows both losses against the
iteration and against the training time, and the training speed per interval.

The image classifiers' CSV (mnist_train, resnet) has the header epoch,device,split,loss,accuracy,seconds,images_per_s
and one row per epoch, device and split (train/test). The PNG (default: the CSV's name with .png) shows loss and
accuracy per epoch, one curve per device and split, and the mean training-epoch time per device as bars, with the
GPU's speedup over the CPU when both ran (--compare). Needs matplotlib (Debian: python3-matplotlib); renders
off-screen (Agg).
Exit status: 0 written, 2 for a missing or malformed CSV or a missing matplotlib.
"""
import argparse
import csv
import math
import os
import sys

HEADER = ["epoch", "device", "split", "loss", "accuracy", "seconds", "images_per_s"]
GPT_HEADER = ["iter", "split", "loss", "ms_per_iter", "tokens_per_s", "elapsed_s"]


def fail(message):
    print(f"plot_metrics: {message}", file=sys.stderr)
    sys.exit(2)


def read_metrics(path):
    """{(device, split): {epoch: row}}; a later row for the same epoch (a resumed run) replaces an earlier one."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    if rows and rows[0] == GPT_HEADER:
        return read_gpt_metrics(path, rows)
    if not rows or rows[0] != HEADER:
        found = ",".join(rows[0]) if rows else "an empty file"
        fail(f"{path}: expected the header {','.join(HEADER)} or {','.join(GPT_HEADER)}, found {found}")
    series = {}
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(HEADER):
            fail(f"{path}:{line}: expected {len(HEADER)} fields, found {len(row)}")
        try:
            epoch = int(row[0])
            loss, accuracy, seconds, images_per_s = (float(v) for v in row[3:])
        except ValueError:
            fail(f"{path}:{line}: epoch must be an integer and loss..images_per_s numbers, found {','.join(row)}")
        if row[2] not in ("train", "test"):
            fail(f"{path}:{line}: split must be train or test, found {row[2]!r}")
        series.setdefault((row[1], row[2]), {})[epoch] = {
            "loss": loss, "accuracy": accuracy, "seconds": seconds, "images_per_s": images_per_s}
    if not series:
        fail(f"{path}: no data rows")
    return series


def read_gpt_metrics(path, rows):
    """{split: {iter: row}} of gpt_train's CSV (a resumed run's later row for an iteration replaces the earlier)."""
    series = {"train": {}, "val": {}}
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(GPT_HEADER) or row[1] not in series:
            fail(f"{path}:{line}: expected iter,train|val,loss,ms_per_iter,tokens_per_s,elapsed_s, "
                 f"found {','.join(row)}")
        try:
            values = {"loss": float(row[2]), "elapsed_s": float(row[5])}
            if row[1] == "train":
                values.update(ms_per_iter=float(row[3]), tokens_per_s=float(row[4]))
            series[row[1]][int(row[0])] = values
        except ValueError:
            fail(f"{path}:{line}: expected numbers, found {','.join(row)}")
    if not series["val"] and not series["train"]:
        fail(f"{path}: no data rows")
    return series


def plot_gpt(series, out_path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail(f"matplotlib is not installed for {sys.executable} (Debian: sudo apt-get install python3-matplotlib, "
             "then run this script with /usr/bin/python3)")
    fig, (ax_iter, ax_time, ax_speed) = plt.subplots(1, 3, figsize=(15, 4.5))
    for split, style in (("train", "--"), ("val", "-")):
        points = series[split]
        iters = sorted(points)
        ax_iter.plot(iters, [points[i]["loss"] for i in iters], linestyle=style, marker="o", label=split)
        ax_time.plot([points[i]["elapsed_s"] for i in iters], [points[i]["loss"] for i in iters], linestyle=style,
                     marker="o", label=split)
    for ax, xlabel in ((ax_iter, "iteration"), (ax_time, "training seconds (evaluation excluded)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("loss")
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax_iter.set_title("loss per iteration (train: interval mean)")
    ax_time.set_title("loss against training time")
    train = series["train"]
    iters = sorted(train)
    ax_speed.plot(iters, [train[i]["tokens_per_s"] for i in iters], marker="o")
    ax_speed.set_xlabel("iteration")
    ax_speed.set_ylabel("tokens/s")
    ax_speed.set_title("training speed per interval")
    ax_speed.set_ylim(bottom=0)
    ax_speed.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        fail(f"cannot write {out_path}: {e.strerror}")
    plt.close(fig)


def device_order(devices):
    """CPU first, then GPUs in index order, so the bars read as 'baseline, then speedup'."""
    return sorted(devices, key=lambda d: (d != "cpu", d))


def plot(series, out_path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail(f"matplotlib is not installed for {sys.executable} (Debian: sudo apt-get install python3-matplotlib, "
             "then run this script with /usr/bin/python3)")

    devices = device_order({d for d, _ in series})
    colors = {d: f"C{i}" for i, d in enumerate(devices)}
    styles = {"train": "--", "test": "-"}
    fig, (ax_loss, ax_acc, ax_time) = plt.subplots(1, 3, figsize=(15, 4.5))

    for device in devices:
        for split in ("train", "test"):
            points = series.get((device, split))
            if not points:
                continue
            epochs = sorted(points)
            label = f"{device} {split}"
            kwargs = dict(color=colors[device], linestyle=styles[split], marker="o", label=label)
            ax_loss.plot(epochs, [points[e]["loss"] for e in epochs], **kwargs)
            ax_acc.plot(epochs, [points[e]["accuracy"] for e in epochs], **kwargs)
    for ax, name in ((ax_loss, "loss"), (ax_acc, "accuracy")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.set_title(f"{name} per epoch")
        ax.grid(True, alpha=0.3)
        ax.legend()
        ax.xaxis.get_major_locator().set_params(integer=True)

    # Mean training-epoch time per device: the CPU-vs-GPU comparison.
    timed = [d for d in devices if series.get((d, "train"))]
    means = [sum(r["seconds"] for r in series[(d, "train")].values()) / len(series[(d, "train")]) for d in timed]
    bars = ax_time.bar(timed, means, color=[colors[d] for d in timed])
    cpu_mean = means[timed.index("cpu")] if "cpu" in timed else None
    for device, bar, mean in zip(timed, bars, means):
        ips = sum(r["images_per_s"] for r in series[(device, "train")].values()) / len(series[(device, "train")])
        text = f"{mean:.2f} s\n{ips:,.0f} img/s"
        if cpu_mean is not None and device != "cpu" and mean > 0:
            text += f"\n{cpu_mean / mean:.1f}x faster"
        ax_time.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                         fontsize=9, xytext=(0, 3), textcoords="offset points")
    ax_time.set_ylabel("seconds")
    ax_time.set_title("training epoch time (mean)" + ("" if len(timed) > 1 else f": {timed[0]} only"))
    ax_time.set_ylim(0, max(means) * 1.35 if means and max(means) > 0 else 1)
    ax_time.grid(True, axis="y", alpha=0.3)

    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        fail(f"cannot write {out_path}: {e.strerror}")
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="the file written by mnist_train --metrics or gpt_train --metrics")
    parser.add_argument("-o", "--output", help="PNG to write (default: CSV path with .png)")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    series = read_metrics(args.csv)
    if "val" in series:  # gpt_train's
        plot_gpt(series, out, args.title)
        print(f"wrote {out}")
        return
    for (device, split), points in series.items():
        for epoch, row in points.items():
            if not all(math.isfinite(v) for v in row.values()):
                print(f"plot_metrics: warning: {device} {split} epoch {epoch} has a non-finite value", file=sys.stderr)
    plot(series, out, args.title)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
