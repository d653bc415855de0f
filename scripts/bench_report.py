#!/usr/bin/env python3
"""Merges Google Benchmark JSON files, prints the guard/bare table and draws the plots.

    scripts/bench_report.py --out all.json [--plots docs/perf] a.json b.json ...

Pairs every guarded benchmark with its bare twin from the same binary and run: BM_X with
BM_X_bare, and the SQL benchmarks' BM_Guard_X with BM_Bare_X. Reads the median aggregate when
the run had repetitions, else the single run. Then two comparisons within one binary:
CachedStore replays against the uncached replay of the same store, and, for the SQL stores,
a fresh key in lease mode (two commits) against transactional mode (one commit). Last, the
per-call latency percentiles of the pairs that sample them (bench/latency.hpp). Used by
scripts/bench.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(paths):
    """All benchmark entries of the files, each tagged with its binary's name."""
    context, entries = None, []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        binary = os.path.basename(path).removesuffix(".json")
        for b in data.get("benchmarks", []):
            b.setdefault("binary", binary)  # a merged file keeps each entry's binary
            entries.append(b)
    return context, entries


def summaries(entries):
    """One entry per (binary, run_name): the median aggregate if any, else the only run."""
    by_name = {}
    for b in entries:
        if b.get("error_occurred"):
            continue
        key = (b["binary"], b.get("run_name", b["name"]))
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                by_name[key] = b
        elif key not in by_name or by_name[key].get("run_type") != "aggregate":
            by_name[key] = b
    return by_name


def guarded_name(run_name):
    """The guarded benchmark a bare twin belongs to, or None if run_name is not a twin."""
    base, sep, rest = run_name.partition("/")
    if base.endswith("_bare"):
        return base[: -len("_bare")] + sep + rest
    if base.startswith("BM_Bare"):
        return "BM_Guard" + base[len("BM_Bare"):] + sep + rest
    return None


def figure_name(run_name):
    base, _, rest = run_name.partition("/")
    base = base.removeprefix("BM_").removeprefix("Guard").lstrip("_").replace("_", " ")
    parts = [p for p in rest.split("/") if p and p != "real_time" and not p.startswith("iterations:")]
    return " ".join([base] + [p.replace("threads:", "t") for p in parts])


def ns_per_op(b):
    return b["real_time"] * NS_PER_UNIT.get(b.get("time_unit", "ns"), 1.0)


def ops_per_s(b):
    return b.get("items_per_second") or 1e9 / ns_per_op(b)


def threads(b):
    return int(b.get("threads", 1))


def pairs(by_name):
    out = []
    for (binary, name), bare in by_name.items():
        g = guarded_name(name)
        if g is None or (binary, g) not in by_name:
            continue
        out.append((binary, figure_name(g), by_name[(binary, g)], bare))
    out.sort(key=lambda p: (p[0], p[1]))
    return out


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def print_table(rows):
    print("| binary | figure | guard | bare | ratio |")
    print("|---|---|---:|---:|---:|")
    for binary, fig, g, b in rows:
        if "allocs_per_call" in g:
            gv, bv = g["allocs_per_call"], b["allocs_per_call"]
            ratio = f"{gv / bv:.2f}" if bv else "–"
            print(f"| {binary} | {fig} | {gv:.2f} allocs | {bv:.2f} allocs | {ratio} |")
            continue
        gt, bt = ns_per_op(g), ns_per_op(b)
        print(f"| {binary} | {fig} | {fmt_time(gt)} | {fmt_time(bt)} | {gt / bt:.2f} |")


# A CachedStore replay benchmark and the uncached replay it replaces, in the same binary.
CACHED_BASELINES = {
    "BM_Cached_Replay": "BM_Memory_Replay",
    "BM_GuardCached_Replay": "BM_Guard_Replay",
    "BM_Redis_Cached_Replay": "BM_Redis_Record_Replay",
}


def comparisons(by_name):
    """(title, binary, figure, slower, faster) rows: cached against uncached, lease against
    transactional mode. The factor printed is slower time / faster time."""
    out = []
    for (binary, name), b in sorted(by_name.items()):
        base, sep, rest = name.partition("/")
        if base in CACHED_BASELINES:
            uncached = by_name.get((binary, CACHED_BASELINES[base] + sep + rest))
            if uncached:
                out.append(("cached replay vs uncached", binary, figure_name(name), uncached, b))
        for side in ("Guard", "Bare"):
            if base == f"BM_{side}Transactional_Fresh":
                lease = by_name.get((binary, f"BM_{side}_Fresh" + sep + rest))
                if lease:
                    out.append((f"transactional vs lease mode ({side.lower()})", binary,
                                figure_name(name), lease, b))
    return out


def print_comparisons(rows):
    if not rows:
        return
    print()
    print("| comparison | binary | figure | baseline | this | factor |")
    print("|---|---|---|---:|---:|---:|")
    for title, binary, fig, slow, fast in rows:
        st, ft = ns_per_op(slow), ns_per_op(fast)
        extra = f" (hit rate {fast['hit_rate']:.3f})" if "hit_rate" in fast else ""
        print(f"| {title} | {binary} | {fig}{extra} | {fmt_time(st)} | {fmt_time(ft)} | "
              f"{st / ft:.2f}x |")


PERCENTILES = ("p50_ns", "p90_ns", "p99_ns")


def latency_rows(rows):
    """The pairs whose two sides both sampled per-call latency (bench/latency.hpp)."""
    return [r for r in rows if all(p in r[2] and p in r[3] for p in PERCENTILES)]


def print_latency(rows):
    if not rows:
        return
    print()
    print("| binary | figure | guard p50 / p90 / p99 | bare p50 / p90 / p99 | p99 ratio |")
    print("|---|---|---:|---:|---:|")
    for binary, fig, g, b in rows:
        gs = " / ".join(fmt_time(g[p]) for p in PERCENTILES)
        bs = " / ".join(fmt_time(b[p]) for p in PERCENTILES)
        print(f"| {binary} | {fig} | {gs} | {bs} | {g['p99_ns'] / b['p99_ns']:.2f} |")


def plot(rows, directory, context):
    if shutil.which("gnuplot") is None:
        print("bench: gnuplot not found, no plots drawn (Debian: gnuplot-nox)", file=sys.stderr)
        return
    os.makedirs(directory, exist_ok=True)
    timed = [r for r in rows if "allocs_per_call" not in r[2]]
    load_avg = context.get("load_avg") or [os.getloadavg()[0]]
    subtitle = (f"{context.get('num_cpus', '?')} CPUs, load average at start {load_avg[0]:.1f}, "
                f"{context.get('date', '')[:16]}")
    def label(binary, fig):  # "redis: Record Fresh t8", not "redis: Redis Record Fresh t8"
        short = binary.removeprefix("idem_bench_")
        return short + ": " + fig.removeprefix(short.capitalize() + " ")
    # Each plot: file name, data lines, width, y axis, gnuplot plot clause ({data} is the file).
    plots = [
        ("throughput.png",
         [f'"{label(bn, fig)}" {ops_per_s(g):.6g} {ops_per_s(b):.6g}' for bn, fig, g, b in timed],
         34 * len(timed) + 200, 720,
         "operations per second, guard and bare twin, by backend, path and threads",
         "set logscale y; set ylabel 'operations per second (log)'; set bmargin 12",
         "'{data}' using 2:xtic(1) title 'guard' lc rgb '#1f77b4', "
         "'' using 3 title 'bare twin' lc rgb '#aaaaaa'"),
        ("memory_paths.png",
         [f'"{fig.removesuffix(" t1")}" {ns_per_op(g):.6g} {ns_per_op(b):.6g}'
          for bn, fig, g, b in timed if bn == "idem_bench_memory" and threads(g) == 1],
         900, 520, "MemoryStore: time per call by path (one thread)",
         "unset logscale y; set yrange [0:*]; set ylabel 'ns per call'; set bmargin 7",
         "'{data}' using 2:xtic(1) title 'guard' lc rgb '#1f77b4', "
         "'' using 3 title 'bare twin' lc rgb '#aaaaaa'"),
        ("latency.png",
         [f'"{label(bn, fig)}" {g["p50_ns"]:.6g} {g["p99_ns"]:.6g} {b["p50_ns"]:.6g} '
          f'{b["p99_ns"]:.6g}' for bn, fig, g, b in latency_rows(timed)],
         44 * len(latency_rows(timed)) + 200, 720,
         "latency of one call (p50 and p99), guard and bare twin",
         "set logscale y; set yrange [*:*]; set ylabel 'ns per call (log)'; set bmargin 12",
         "'{data}' using 2:xtic(1) title 'guard p50' lc rgb '#1f77b4', "
         "'' using 3 title 'guard p99' lc rgb '#0b3c61', "
         "'' using 4 title 'bare p50' lc rgb '#cccccc', '' using 5 title 'bare p99' lc rgb '#777777'"),
    ]
    drawn = []
    with tempfile.TemporaryDirectory() as tmp:
        script = """
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -40 left noenhanced
set grid ytics
set key top right
set rmargin 16
"""
        for name, lines, width, height, title, axis, clause in plots:
            if not lines:
                continue  # that binary did not run
            data = os.path.join(tmp, name + ".dat")
            with open(data, "w") as f:
                f.write("\n".join(lines) + "\n")
            script += f"""
set terminal pngcairo size {max(900, width)},{height} font 'sans,10'
set output '{os.path.join(directory, name)}'
set title "idem: {title}\\n{{/*0.8 {subtitle}}}"
{axis}
plot {clause.format(data=data)}
"""
            drawn.append(name)
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print("bench: plots in " + ", ".join(f"{directory}/{name}" for name in drawn), file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="merged Google Benchmark JSON")
    parser.add_argument("--plots", help="directory for the PNG plots")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    context, entries = load(args.inputs)
    with open(args.out, "w") as f:
        json.dump({"context": context, "benchmarks": entries}, f, indent=1)
    by_name = summaries(entries)
    rows = pairs(by_name)
    print_table(rows)
    print_comparisons(comparisons(by_name))
    print_latency(latency_rows(rows))
    if args.plots:
        plot(rows, args.plots, context)


if __name__ == "__main__":
    main()
