#!/usr/bin/env python3
"""Merges Google Benchmark JSON files, prints the guard/bare table and draws the plots.

    scripts/bench_report.py --out all.json [--plots docs/perf] a.json b.json ...

Pairs every guarded benchmark with its bare twin from the same binary and run: BM_X with
BM_X_bare, and the SQL benchmarks' BM_Guard_X with BM_Bare_X. Reads the median aggregate when
the run had repetitions, else the single run. Every ratio reads one way: speed = the guard's
operations per second / the bare twin's (bare time per call / guard time per call), so above 1
the guard is faster and below 1 slower; allocation counts are the one exception, printed as
guard / bare allocations. Then two comparisons within one binary:
CachedStore replays against the uncached replay of the same store, and, for the SQL stores,
a fresh key in lease mode (two commits) against transactional mode (one commit). Last, the
per-call latency percentiles of the pairs that sample them (bench/latency.hpp). Used by
scripts/bench.
"""

import argparse
import json
import math
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


def speed(g, b):
    """The guard's speed relative to its bare twin: > 1 faster, < 1 slower."""
    return ns_per_op(b) / ns_per_op(g)


def print_table(rows):
    print("| binary | figure | guard | bare | speed vs bare (>1 faster) |")
    print("|---|---|---:|---:|---:|")
    for binary, fig, g, b in rows:
        if "allocs_per_call" in g:
            gv, bv = g["allocs_per_call"], b["allocs_per_call"]
            print(f"| {binary} | {fig} | {gv:.2f} allocs | {bv:.2f} allocs | (allocations) |")
            continue
        print(f"| {binary} | {fig} | {fmt_time(ns_per_op(g))} | {fmt_time(ns_per_op(b))} | "
              f"{speed(g, b):.2f} |")


# A CachedStore replay benchmark and the uncached replay it replaces, in the same binary.
CACHED_BASELINES = {
    "BM_Cached_Replay": "BM_Memory_Replay",
    "BM_GuardCached_Replay": "BM_Guard_Replay",
    "BM_Redis_Cached_Replay": "BM_Redis_Record_Replay",
}


def comparisons(by_name):
    """(title, binary, figure, baseline, this) rows: cached against uncached, transactional
    against lease mode. The speed printed is baseline time / this time: > 1, this is faster."""
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
    print("| comparison | binary | figure | baseline | this | speed (>1 faster) |")
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
    print("| binary | figure | guard p50 / p90 / p99 | bare p50 / p90 / p99 | p99 speed (>1 faster) |")
    print("|---|---|---:|---:|---:|")
    for binary, fig, g, b in rows:
        gs = " / ".join(fmt_time(g[p]) for p in PERCENTILES)
        bs = " / ".join(fmt_time(b[p]) for p in PERCENTILES)
        print(f"| {binary} | {fig} | {gs} | {bs} | {b['p99_ns'] / g['p99_ns']:.2f} |")


BACKEND_COLORS = {"memory": "#1f77b4", "sqlite": "#2ca02c", "entity": "#9467bd",
                  "postgres": "#d62728", "redis": "#ff7f0e"}


def backend(binary):
    return binary.removeprefix("idem_bench_")


def short_figure(binary, fig):
    """ "Record Fresh t8" for redis' "Redis Record Fresh t8": the backend is the group's."""
    return fig.removeprefix(backend(binary).capitalize() + " ")


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def plot_speed(timed, path, subtitle, tmp):
    """Every pair's speed against its bare twin, one horizontal bar from 1.0, grouped by
    backend: right of the line the guard is faster, left slower (log2 axis: 2x and 0.5x are the
    same distance)."""
    lines, y, groups = [], 0, []
    for name in BACKEND_COLORS:
        rows = [r for r in timed if backend(r[0]) == name]
        if not rows:
            continue
        groups.append(name)
        for bn, fig, g, b in rows:
            color = int(BACKEND_COLORS[name][1:], 16)
            lines.append(f'{y} {speed(g, b):.4g} {color} "{short_figure(bn, fig)}"')
            y -= 1
        y -= 1  # a gap between backends
    if not lines:
        return False
    data = os.path.join(tmp, "speed.dat")
    with open(data, "w") as f:
        f.write("\n".join(lines) + "\n")
    keys = ", ".join(f"NaN with boxes lc rgb '{BACKEND_COLORS[n]}' fs solid title '{n}'"
                     for n in groups)
    speeds = [float(line.split()[1]) for line in lines]
    low = 2.0 ** min(-2, math.floor(math.log2(min(speeds) / 1.3)))
    high = 2.0 ** max(2, math.ceil(math.log2(max(speeds) * 1.3)))
    tics = ", ".join(f'"{t:g}" {t:g}' for t in (0.125, 0.25, 0.5, 0.8, 1, 1.25, 2, 4, 8)
                     if low <= t <= high)
    gnuplot(f"""
set terminal pngcairo size 900,{16 * (len(lines) + len(groups)) + 170} font 'sans,10'
set output '{path}'
set title "idem: speed of each benchmark against its bare twin (>1: the guard is faster)\\n{{/*0.8 {subtitle}}}"
set logscale x 2
set xrange [{low:g}:{high:g}]
set xtics ({tics})
set xlabel 'guard ops/s / bare ops/s (log scale)'
set ytics noenhanced font ',9'
set yrange [{y + 0.5}:0.5]
set grid xtics
set arrow from 1, graph 0 to 1, graph 1 nohead lw 2 lc rgb 'black'
set style fill solid 0.85 border -1
set key below horizontal
plot '{data}' using ($2 < 1 ? $2 : 1):1:($2 < 1 ? $2 : 1):($2 < 1 ? 1 : $2):($1 - 0.4):($1 + 0.4):3:ytic(4) \\
       with boxxyerror fc rgb variable notitle, \
     '' using ($2 < 1 ? $2 / 1.03 : NaN):1:(sprintf("%.2f", $2)) with labels right font ',8' notitle, \
     '' using ($2 < 1 ? NaN : $2 * 1.03):1:(sprintf("%.2f", $2)) with labels left font ',8' notitle, \
     {keys}
""")
    return True


def plot_redis_threads(timed, path, subtitle, tmp):
    """Redis record store operations per second against client threads, guard and bare."""
    series = {}
    for bn, fig, g, b in timed:
        if backend(bn) != "redis":
            continue
        name = short_figure(bn, fig)
        base, _, t = name.rpartition(" t")
        if base not in ("Record Fresh", "Record Replay") or not t.isdigit():
            continue
        series.setdefault(base, []).append((int(t), ops_per_s(g), ops_per_s(b)))
    if not series:
        return False
    clauses = []
    colors = {"Record Fresh": "#d62728", "Record Replay": "#1f77b4"}
    for base, points in sorted(series.items()):
        data = os.path.join(tmp, base.replace(" ", "_") + ".dat")
        with open(data, "w") as f:
            f.write("\n".join(f"{t} {gv:.6g} {bv:.6g}" for t, gv, bv in sorted(points)) + "\n")
        what = base.removeprefix("Record ").lower()
        c = colors.get(base, "#333333")
        clauses.append(f"'{data}' using 1:($2/1000) with linespoints lw 2 pt 7 lc rgb '{c}' "
                       f"title '{what}, guard'")
        clauses.append(f"'{data}' using 1:($3/1000) with linespoints lw 2 pt 6 dt 2 lc rgb '{c}' "
                       f"title '{what}, bare hiredis'")
    gnuplot(f"""
set terminal pngcairo size 900,520 font 'sans,10'
set output '{path}'
set title "idem: RedisStore calls per second against client threads, one Redis server\\n{{/*0.8 {subtitle}}}"
set logscale x 2
set xtics (1, 2, 4, 8, 16, 32)
set xlabel 'client threads'
set ylabel 'thousand calls per second'
set yrange [0:*]
set grid
set key top left
plot {", ".join(clauses)}
""")
    return True


def plot_latency(timed, path, subtitle, tmp):
    """One panel per backend, log scale: for each one-thread benchmark with latency samples, the
    guard and the bare twin as a box from p50 to p90 with a whisker to p99 (with several threads
    a call's latency is mostly its wait for a core)."""
    panels = []
    for name in BACKEND_COLORS:
        rows = [r for r in latency_rows(timed) if backend(r[0]) == name and threads(r[2]) == 1]
        if rows:
            panels.append((name, rows))
    if not panels:
        return False
    script = f"""
set terminal pngcairo size 900,{300 * len(panels) + 70} font 'sans,10'
set output '{path}'
set multiplot layout {len(panels)},1 title "idem: latency of one call, one thread, per backend: box p50-p90, whisker to p99\\n{{/*0.8 {subtitle}}}"
set style fill solid 0.7 border -1
set grid ytics mytics
set logscale y
set format y '%g'
set xtics rotate by -20 left noenhanced font ',9'
set key outside right top vertical
set lmargin 10
set rmargin 14
set bmargin 4.5
"""
    for name, rows in panels:
        data = os.path.join(tmp, f"latency_{name}.dat")
        with open(data, "w") as f:
            for i, (bn, fig, g, b) in enumerate(rows):
                vals = [v / 1e3 for v in (g["p50_ns"], g["p90_ns"], g["p99_ns"],
                                          b["p50_ns"], b["p90_ns"], b["p99_ns"])]
                label = short_figure(bn, fig).removesuffix(" t1")
                f.write(f'{i} "{label}" ' + " ".join(f"{v:.5g}" for v in vals) + "\n")
        low = min(min(g["p50_ns"], b["p50_ns"]) for _, _, g, b in rows) / 1e3
        top = max(max(g["p99_ns"], b["p99_ns"]) for _, _, g, b in rows) / 1e3
        script += f"""
set title '{name}'
set ylabel 'µs per call (log)'
set xrange [-0.6:{len(rows) - 0.4}]
set yrange [{low / 1.6:.4g}:{top * 1.6:.4g}]
set boxwidth 0.3
plot '{data}' using ($1-0.17):3:3:5:4:xtic(2) with candlesticks lc rgb '{BACKEND_COLORS[name]}' title 'guard', \\
     '' using ($1+0.17):6:6:8:7 with candlesticks lc rgb '#999999' title 'bare twin'
"""
    script += "unset multiplot\n"
    gnuplot(script)
    return True


def plot_memory_paths(timed, path, subtitle, tmp):
    lines = [f'"{fig.removesuffix(" t1")}" {ns_per_op(g):.6g} {ns_per_op(b):.6g}'
             for bn, fig, g, b in timed if bn == "idem_bench_memory" and threads(g) == 1]
    if not lines:
        return False
    data = os.path.join(tmp, "memory_paths.dat")
    with open(data, "w") as f:
        f.write("\n".join(lines) + "\n")
    gnuplot(f"""
set terminal pngcairo size 900,520 font 'sans,10'
set output '{path}'
set title "idem: MemoryStore, time per call by path (one thread)\\n{{/*0.8 {subtitle}}}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -40 left noenhanced
set grid ytics
set key top right
set yrange [0:*]
set ylabel 'ns per call'
set bmargin 7
plot '{data}' using 2:xtic(1) title 'guard' lc rgb '#1f77b4', '' using 3 title 'bare twin' lc rgb '#aaaaaa'
""")
    return True


def plot(rows, directory, context):
    if shutil.which("gnuplot") is None:
        print("bench: gnuplot not found, no plots drawn (Debian: gnuplot-nox)", file=sys.stderr)
        return
    os.makedirs(directory, exist_ok=True)
    timed = [r for r in rows if "allocs_per_call" not in r[2]]
    load_avg = context.get("load_avg") or [os.getloadavg()[0]]
    subtitle = (f"{context.get('num_cpus', '?')} CPUs, load average at start {load_avg[0]:.1f}, "
                f"{context.get('date', '')[:16]}")
    drawn = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, draw in (("speed.png", plot_speed), ("redis_threads.png", plot_redis_threads),
                           ("latency.png", plot_latency), ("memory_paths.png", plot_memory_paths)):
            if draw(timed, os.path.join(directory, name), subtitle, tmp):
                drawn.append(name)
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
