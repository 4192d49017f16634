#!/usr/bin/env python3
"""Reads every corpus file with `cubin-manifest --json show` and compares each kernel it lists
with cuobjdump -res-usage: registers, stack (local bytes), static shared memory and constant bank
0 (parameter base + parameter bytes). Writes a Markdown report; exits 1 on a crash, a hang, or a
disagreement that no rule below explains. Known, explained differences:
  shared: on sm_90 and later cuobjdump counts 1 KiB the driver reserves for every block (the
          reader reports the kernel's own static shared memory, as ptxas -v does).
"""
import argparse
import json
import os
import re
import stat
import subprocess
import sys
from collections import Counter, defaultdict

TIMEOUT_S = 120


def sm_number(arch: str) -> int:
    m = re.match(r"sm_(\d+)", arch or "")
    return int(m.group(1)) if m else 0


def base_arch(arch: str) -> str:
    return f"sm_{sm_number(arch)}"


def run_show(cli: str, path: str):
    """(outcome, detail, doc): outcome is read, refused, listed-with-errors, crashed or hung."""
    try:
        p = subprocess.run([cli, "--json", "show", path], capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "hung", f"no answer in {TIMEOUT_S} s", None
    if p.returncode < 0 or p.returncode > 3:
        return "crashed", f"exit {p.returncode}: {p.stderr.decode(errors='replace')[-300:]}", None
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        return "crashed", f"exit {p.returncode} with output that is not JSON ({e})", None
    if p.returncode == 0:
        return "read", "", doc
    if "error" in doc:
        return "refused", doc["error"]["message"], doc
    if doc.get("unreadable_entries"):
        reasons = Counter(e["error"].split(":")[0] for e in doc["fatbin_entries"] if "error" in e)
        return "listed-with-errors", "; ".join(f"{n} x {r}" for r, n in reasons.items()), doc
    return "refused", f"exit {p.returncode}", doc


def our_kernels(doc):
    """(arch, name) -> list of kernel dicts, from a cubin or a container's cubin entries."""
    out = defaultdict(list)
    cubins = [doc["cubin"]] if "cubin" in doc else [e["cubin"] for e in doc.get("fatbin_entries", []) if "cubin" in e]
    for c in cubins:
        for k in c["kernels"]:
            out[(base_arch(c["arch"]), k["name"])].append(k)
    return out


def cuobjdump_kernels(cuobjdump: str, path: str, default_arch: str):
    """(arch, name) -> list of {REG, STACK, SHARED, CONSTANT[0]} from cuobjdump -res-usage."""
    out = defaultdict(list)
    try:
        p = subprocess.run([cuobjdump, "-res-usage", path], capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return out
    arch, name = default_arch, None
    for line in p.stdout.decode(errors="replace").splitlines():
        m = re.match(r"\s*arch = (sm_\w+)", line)
        if m:
            arch = base_arch(m.group(1))
            continue
        m = re.match(r"\s*Function (\S+):\s*$", line)
        if m:
            name = m.group(1)
            continue
        if name and "REG:" in line:
            fields = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line))
            out[(arch, name)].append({k: int(v) for k, v in fields.items()})
            name = None
    return out


def compare(ours, theirs, tally, unexplained, path):
    # Kernels cuobjdump lists that the reader does not (in the archs whose cubins it read).
    archs = {arch for arch, _ in ours}
    for key, listed in theirs.items():
        if key[0] in archs and len(listed) > len(ours.get(key, [])):
            tally["kernel missing here"] += 1
            unexplained.append(f"{path}: {key[0]} {key[1]}: cuobjdump lists it, the reader does not")
    for key, mine in ours.items():
        for i, k in enumerate(mine):
            if i >= len(theirs.get(key, [])):
                tally["kernel not in cuobjdump's listing"] += 1
                unexplained.append(f"{path}: {key[0]} {key[1]}: cuobjdump does not list it")
                continue
            t = theirs[key][i]
            tally["kernels compared"] += 1
            checks = {
                "registers": (k["registers"], t.get("REG")),
                "stack": (k["local_bytes"], t.get("STACK")),
                "constant bank 0": (k["param_base"] + k["param_bytes"], t.get("CONSTANT[0]")),
                "shared": (k["static_shared"], t.get("SHARED")),
            }
            for field, (a, b) in checks.items():
                if a == b:
                    tally[f"{field}: equal"] += 1
                elif field == "shared" and sm_number(key[0]) >= 90 and b == a + 1024:
                    tally["shared: +1 KiB reserved on sm_90+ (explained)"] += 1
                else:
                    tally[f"{field}: UNEXPLAINED"] += 1
                    unexplained.append(f"{path}: {key[0]} {key[1]}: {field} is {a} here, {b} in cuobjdump")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--cuobjdump", default="")
    ap.add_argument("--report", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rows, outcomes, tally, unexplained = [], Counter(), Counter(), []
    kinds = Counter()
    for path in sorted(a.files):
        outcome, detail, doc = run_show(a.cli, path)
        outcomes[outcome] += 1
        name = os.path.basename(path)
        cubins = kernels = 0
        entry_kinds = Counter()
        if doc and "cubin" in doc:
            cubins, kernels = 1, len(doc["cubin"]["kernels"])
            entry_kinds["cubin"] += 1
        for e in (doc or {}).get("fatbin_entries", []):
            entry_kinds[e["kind"] + (" (unreadable)" if "error" in e else "")] += 1
            if "cubin" in e:
                cubins += 1
                kernels += len(e["cubin"]["kernels"])
        kinds.update(entry_kinds)
        st = os.stat(path)
        regular = stat.S_ISREG(st.st_mode)
        if a.cuobjdump and doc and regular and outcome in ("read", "listed-with-errors"):
            arch = base_arch(doc["cubin"]["arch"]) if "cubin" in doc else ""
            compare(our_kernels(doc), cuobjdump_kernels(a.cuobjdump, path, arch), tally, unexplained, name)
        what = ", ".join(f"{n} {k}" for k, n in sorted(entry_kinds.items()))
        rows.append(f"| {name} | {st.st_size if regular else '-'} | {outcome} | {what} | {kernels} | {detail[:160]} |")
    with open(a.report, "w") as f:
        f.write(f"Corpus read by {a.cli}: {len(a.files)} files: " + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) + "\n\n")
        f.write("| file | bytes | outcome | entries | kernels | detail |\n|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n\n")
        f.write("Entries by kind: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + "\n\n")
        if a.cuobjdump:
            f.write("Against cuobjdump -res-usage: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.items())) + "\n")
        else:
            f.write("Against cuobjdump: not run (no cuobjdump: the PyPI wheels were not fetched)\n")
        for u in unexplained[:50]:
            f.write(f"- {u}\n")
    bad = outcomes["crashed"] + outcomes["hung"]
    return 1 if bad or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
