#!/usr/bin/env python3
"""The SPLITTRACE lines of kernels built with -DCUBINRT_TRACE_SPLITS=<length> (paged_decode.cu), per bench row.

Reads cubinrt_bench's output (stdin or a file). Each row's traced launches (a single, a queued and
a back-to-back one) print the global timer of every block's start, first step, partials (its KV
range done) and end, as minimum / median / maximum over the blocks, in ns after the first
block's start; the row's table line follows them. Prints per row the medians over its launches,
in microseconds, and the time from the last block's partials to the last block's end (the
merge's tail).
"""
import re
import statistics
import sys

def main() -> int:
    src = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    pending = []
    print("| row | kv | splits | blocks | first step min / med / max | partials min / med / max | end max | end max - partials max |")
    print("|---|---|---|---|---|---|---|---|")
    for line in src:
        if line.startswith("SPLITTRACE"):
            fields = re.findall(r"\| [a-z ]+? (\d+) (\d+) (\d+)", line)
            blocks = int(re.search(r"blocks (\d+)", line).group(1))
            pending.append((blocks, [[int(v) for v in f] for f in fields]))
        elif line.startswith("| B") and pending:
            cells = [c.strip() for c in line.split("|")[1:-1]]
            med = lambda k, q: statistics.median(p[1][k][q] for p in pending) / 1000
            us = lambda k: " / ".join(f"{med(k, q):.1f}" for q in range(3))
            print(f"| {cells[0]} | {cells[1]} | {cells[2]} | {pending[0][0]} | {us(1)} | {us(2)} | {med(3, 2):.1f} | {med(3, 2) - med(2, 2):.1f} |")
            pending = []
    return 0

if __name__ == "__main__":
    sys.exit(main())
