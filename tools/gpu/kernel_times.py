#!/usr/bin/env python3
"""Per-kernel device times of one decode step, from an Nsight Compute CSV.

Input: the CSV that
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
      gpu_decode_bench --mode profile ...
prints: one eager prefill, then one eager decode step, nothing after. The decode
step starts at the third GatherRows launch (each forward gathers twice: the
embedding rows first, the logits rows later); the prefill at the first one (the
launches before it fill the random weights). Prints the chosen step's kernels
grouped by name (count, total and mean microseconds) and their sum, which is the
step's device time without launch gaps: the decode step (default), or with
--prefill the prefill forward (the launches from the first GatherRows to the third),
or with --all every launch of the process (any program: e.g. `vllm-cpp bench latency`),
or with --last the last forward of the process (from its second-to-last GatherRows to
the end: the last decode step of `vllm-cpp bench latency`), or with --step every launch
(a capture of one step: `ncu --profile-from-start off ... vllm-cpp bench latency
--profile-decode-step N`); with --last and --step the first launches are also listed
in order (a layer and a half of the model: what one layer launches).

Usage: kernel_times.py ncu.csv [--prefill | --all | --last | --step]
"""
import csv
import collections
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
NAME_COLUMNS = ("Kernel Name", "Function Name", "Name", "Demangled Name")


def rows(path):
    with open(path, newline="") as f:
        lines = f.readlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    reader = csv.DictReader(lines[start:])
    name_column = next((c for c in NAME_COLUMNS if c in reader.fieldnames), None)
    if name_column is None:
        sys.exit(f"kernel_times: no kernel-name column among {reader.fieldnames}")
    for row in reader:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "")
        if unit not in UNITS:
            sys.exit(f"kernel_times: unknown time unit {unit!r} (columns {reader.fieldnames})")
        yield row[name_column], float(row["Metric Value"].replace(",", "")) * UNITS[unit]


def short(name):
    for anonymous in ("(anonymous namespace)::", "<unnamed>::", "{anonymous}::"):
        name = name.replace(anonymous, "")
    name = name.replace("void ", "")
    cuts = [name.index(c) for c in "<(" if c in name]
    if cuts:
        name = name[: min(cuts)]
    return name.split("::")[-1]


def main():
    kernels = list(rows(sys.argv[1]))
    gathers = [i for i, (name, _) in enumerate(kernels) if "GatherRow" in name]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode not in ("", "--prefill", "--all", "--last", "--step"):
        sys.exit(f"kernel_times: unknown option {mode!r} (known: --prefill, --all, --last, --step)")
    if len(gathers) < 3 and mode not in ("--all", "--step"):
        sys.exit(f"kernel_times: expected 3+ GatherRows launches, found {len(gathers)} in {len(kernels)} kernels")
    if mode in ("--all", "--step"):
        step = kernels
    elif mode == "--last":
        step = kernels[gathers[-2]:]
    else:
        step = kernels[gathers[0] : gathers[2]] if mode == "--prefill" else kernels[gathers[2]:]
    groups = collections.OrderedDict()
    for name, us in step:
        count, total = groups.get(short(name), (0, 0.0))
        groups[short(name)] = (count + 1, total + us)
    total = sum(us for _, us in step)
    what = {"--all": "every launch", "--prefill": "prefill", "--last": "last forward", "--step": "the captured step"}.get(
        mode, "decode step")
    print(f"{what}: {len(step)} kernels, {total:.1f} us of kernel time (no launch gaps)")
    print(f"  {'kernel':44s} {'count':>5s} {'total us':>9s} {'mean us':>8s} {'share':>6s}")
    for name, (count, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name[:44]:44s} {count:5d} {us:9.1f} {us / count:8.2f} {us / total:6.1%}")
    if mode in ("--last", "--step"):
        print("first launches in order (us):")
        for name, us in step[:70]:
            print(f"  {us:8.2f}  {name[:110]}")


if __name__ == "__main__":
    main()
