#!/usr/bin/env python3
"""Prints a `tandem bench --repeat N` JSON file as the markdown table bench/README.md uses.

    bench/grid_table.py results/grid.json [--with-none]

Columns: method, concurrency, median tok/s, median speedup against `none` [min-max over the
rounds], the A/A verdict, the cost model's predicted speedup, the share of target steps
without proposals ("off"), the chosen-K distribution summed over the rounds (steps at K = 0
/ 1-3 / 4-7 / 8+), and the cost terms alpha, K, c, nu, o (medians over the rounds).
`none` rows are left out unless --with-none is given (the A/A rows are always printed).
"""
import gzip
import json
import sys


def k_buckets(result):
    """Shares of steps at K = 0, 1-3, 4-7, 8+ over every round of one row, or None."""
    totals = [0, 0, 0, 0]
    for rep in result.get("repeats", []):
        for k, n in enumerate(rep.get("steps_by_k") or []):
            totals[0 if k == 0 else 1 if k <= 3 else 2 if k <= 7 else 3] += n
    steps = sum(totals)
    return None if steps == 0 else [100.0 * t / steps for t in totals]


def row(result):
    spread = result.get("spread", {})
    s = spread.get("/speedup_vs_none", {})
    label = result["label"]
    speedup = (f"{s['median']:.2f}x [{s['min']:.2f}-{s['max']:.2f}]" if s else
               f"{result.get('speedup_vs_none', 1):.2f}x")
    verdict = (result.get("vs_aa_control") or {}).get("verdict", "")
    terms = {k: v for k, v in (result.get("cost_terms") or {}).items() if v is not None}
    predicted = f"{terms['predicted_speedup']:.2f}x" if "predicted_speedup" in terms else "–"
    off = f"{100 * result.get('speculation_off_share', 0):.0f} %"
    buckets = k_buckets(result)
    ks = " / ".join(f"{b:.0f}" for b in buckets) + " %" if buckets and result["method"] != "none" \
        else "–"
    def term(name, fmt):
        return format(terms[name], fmt) if name in terms else "–"
    return (f"| {label} | {result['concurrency']} | {result['throughput_tok_s']:.0f} | {speedup} "
            f"| {verdict} | {predicted} | {off} | {ks} | {term('alpha', '.2f')} "
            f"| {term('k_mean', '.2f')} | {term('c', '.3f')} | {term('nu', '.2f')} "
            f"| {term('o', '.2f')} |")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    opener = gzip.open if argv[1].endswith(".gz") else open
    with opener(argv[1], "rt") as f:
        results = json.load(f)["results"]
    print("| method | conc | tok/s | speedup [min-max] | vs A/A | predicted | off "
          "| steps at K = 0 / 1-3 / 4-7 / 8+ | α | K | c | ν | o |")
    print("|---|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        if r["method"] == "none" and not r.get("aa_control") and "--with-none" not in argv:
            continue
        print(row(r))


if __name__ == "__main__":
    main(sys.argv)
