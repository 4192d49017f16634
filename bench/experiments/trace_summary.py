#!/usr/bin/env python3
"""Medians of the TRACE lines a kernel built with -DCUBINRT_TRACE=<length> prints (paged_decode.cu).

Reads cubinrt_bench's output (stdin or a file). The bench times each dtype's row with 3 warm-up
launches, 25 single launches and then 1000 back to back, so the lines come in runs of 1028 per
dtype; this prints, per run: the kernel's duration by the global timer (block (0, 0, 0), start to
end), and the SM cycles from its start to its first step's data, to every warp's partial result
and to its output stores.
"""
import statistics
import sys

PER_ROW = 3 + 25 + 1000

def main() -> int:
    src = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    rows = [[int(x) for x in line.split()[1:6]] for line in src if line.startswith("TRACE ")]
    if not rows or len(rows) % PER_ROW:
        print(f"trace_summary: {len(rows)} TRACE lines, not a multiple of {PER_ROW}", file=sys.stderr)
        return 1
    for i in range(0, len(rows), PER_ROW):
        part = rows[i:i + PER_ROW]
        med = lambda k: statistics.median(r[k] for r in part)
        ns = statistics.median(r[1] - r[0] for r in part)
        print(f"row {i // PER_ROW}: kernel {ns:.0f} ns by the global timer; cycles to the first step {med(2):.0f}, "
              f"to the warps' partials {med(3):.0f}, to the output {med(4):.0f}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
