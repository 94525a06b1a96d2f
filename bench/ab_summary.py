#!/usr/bin/env python3
"""Summary of bench/ab_builds.sh runs: per configuration (method, concurrency), the median
over the rounds of the throughput ratio B/A measured in the same round, its min-max, and
over all configurations the median and the geometric mean with a 95 % interval.

    bench/ab_summary.py OUT_DIR [OUT_DIR...]
"""
import collections, glob, json, math, re, statistics, sys


def throughputs(path):
    return {(x['method'], x['concurrency']): x['throughput_tok_s']
            for x in json.load(open(path))['results']}


def main(dirs):
    per = collections.defaultdict(list)
    for out in dirs:
        for a_path in sorted(glob.glob(out + '/a.r*.json')):
            b_path = a_path.replace('/a.r', '/b.r')
            try:
                a, b = throughputs(a_path), throughputs(b_path)
            except (OSError, ValueError) as e:
                print(f'skipping round {a_path}: {e}')
                continue
            for key in a.keys() & b.keys():
                per[key].append(b[key] / a[key])
    if not per:
        sys.exit('no complete rounds')
    print('| method | conc | rounds | B/A: median of per-round ratios [min-max] |')
    print('|---|---:|---:|---:|')
    every = []
    for key in sorted(per, key=lambda k: (k[1], k[0])):
        r = per[key]
        every += r
        print(f'| {key[0]} | {key[1]} | {len(r)} | {statistics.median(r):.3f} [{min(r):.2f}-{max(r):.2f}] |')
    logs = [math.log(x) for x in every]
    m, se = statistics.mean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
    print(f'\nall {len(every)} ratios: median {statistics.median(every):.3f}, geometric mean '
          f'{math.exp(m):.3f} (95 % interval {math.exp(m - 1.96 * se):.3f}-{math.exp(m + 1.96 * se):.3f})')


if __name__ == '__main__':
    main(sys.argv[1:])
