#!/usr/bin/env python3
"""Where a speculative row's extra time went, from the coordinator's phase trace.

  bench/phase_excess.py NONE_PHASES.log OTHER_PHASES.log

Each file holds the `phase:` lines (GLOG_v=2, coordinator/engine_phase.cc LogPhase) of
one row's runs, e.g. `none` and `draft` runs of the same prompts and concurrency. The
script fits phase time = a + b * rows on the `none` phases, prices every phase of the
other row as if it were a plain phase of the same rows, and prints, per kind of phase
(draft work, catch-up feeds, speculative verifies, plain), the time spent beyond that
price. Both rows generate the same tokens, so the totals' difference is the row's loss
(or gain), and the kinds say where it came from.
"""
import collections
import re
import statistics
import sys


def load(path):
    phases = []
    for line in open(path):
        if 'phase:' not in line:
            continue
        fields = re.findall(r'(\w+) ([\d.]+)', line.split('phase:')[1])
        phases.append({k: float(v) for k, v in fields})
    return phases


def kind(p):
    if p['fed'] > 0:
        return 'catch-up feed + draft' if p['draft'] > 0 else 'catch-up feed'
    if p['draft'] > 0:
        return 'draft + speculative verify' if p['proposed'] > 0 else 'draft (pre-draft)'
    return 'speculative verify' if p['proposed'] > 0 else 'plain'


def main(none_path, other_path):
    base, other = load(none_path), load(other_path)
    rows = [p['rows'] for p in base]
    times = [p['phase_ms'] for p in base]
    mean_rows, mean_time = statistics.mean(rows), statistics.mean(times)
    slope = sum((r - mean_rows) * (t - mean_time) for r, t in zip(rows, times)) / sum(
        (r - mean_rows) ** 2 for r in rows)
    intercept = mean_time - slope * mean_rows
    print('none: %d phases, %.0f ms; fit %.3f + %.4f ms/row' %
          (len(base), sum(times), intercept, slope))
    groups = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
    for p in other:
        g = groups[kind(p)]
        g[0] += 1
        g[1] += p['phase_ms']
        g[2] += intercept + slope * p['rows']
        g[3] += p['proposed']
    total = sum(p['phase_ms'] for p in other)
    print('other: %d phases, %.0f ms (%+.1f %% against none)' %
          (len(other), total, 100 * (total / sum(times) - 1)))
    for name, (n, spent, priced, proposed) in sorted(groups.items()):
        print('  %-27s %6d phases %8.0f ms, priced as plain %8.0f ms, excess %+7.0f ms, '
              'proposed %d' % (name, n, spent, priced, spent - priced, proposed))


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
