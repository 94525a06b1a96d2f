#!/usr/bin/env python3
"""Plots a `tandem bench --out` JSON file.

Usage: plot_results.py RESULTS.json OUT.png

Three panels against concurrency, one line per (method, rule, pipelining), the A/A
control of `tandem bench --aa-control` a line of its own ("none (A/A)"): throughput
(generated tokens/s), speedup over `none` at the same concurrency, and acceptance
rate. Needs matplotlib (Debian: python3-matplotlib). `tandem bench --plot` runs a
copy of this script built into the binary.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(results, field):
    lines = {}
    for row in results:
        label = row.get("label", row["method"])  # "none (A/A)" for the A/A control.
        if row["method"] != "none" and row.get("pipelining", "default") != "default":
            label += " (pipelining %s)" % row["pipelining"]
        if row.get("rule", "default") != "default":
            label += " [%s]" % row["rule"]
        value = row.get(field)
        if value is None:
            continue
        lines.setdefault(label, []).append((row["concurrency"], value))
    return {label: sorted(points) for label, points in lines.items()}


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        report = json.load(f)
    results = report.get("results", [])
    if not results:
        sys.stderr.write("no results in %s\n" % argv[1])
        return 1
    panels = [
        ("throughput_tok_s", "throughput (tokens/s)", None),
        ("speedup_vs_none", "speedup vs none", 1.0),
        ("acceptance_rate", "acceptance rate", None),
    ]
    # One colour per line, the same in every panel.
    labels = list(series(results, "concurrency"))
    colours = {label: "C%d" % (i % 10) for i, label in enumerate(labels)}
    levels = sorted({row["concurrency"] for row in results})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, (field, title, reference) in zip(axes, panels):
        for label, points in series(results, field).items():
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", label=label, color=colours[label])
        if reference is not None:
            ax.axhline(reference, color="grey", linewidth=0.8, linestyle="--")
        if field == "acceptance_rate":
            ax.set_ylim(0, 1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(level) for level in levels])
        ax.minorticks_off()
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    model = report.get("server", {}).get("model_info") or {}
    target = (model.get("target") or {}).get("name", "?")
    draft = (model.get("draft") or {}).get("name", "none")
    fig.suptitle("tandem bench: target %s, draft %s, max_tokens %s" % (
        target, draft, report.get("settings", {}).get("max_tokens", "?")))
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
