#!/usr/bin/env python3
"""Report of scripts/bench --proxy: reads its runs (one JSON line each), writes OUT.json and
OUT.csv, prints the proxy beside the upstream it stands in front of at each connection count and
where the target stands (replay at least 0.8x straight), with the replay's floor (the proxy's
client server answering from memory, without guard or store) where it was measured, and draws
throughput and p99 against connections (OUT.png beside OUT.json, or in --plots DIR).
"""
import argparse
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPLAY_TARGET = 0.8
# Each proxy scenario is compared with the straight run taken just before it.
SERIES = [("upstream", "replay", "nginx straight (before replay)"),
          ("floor", "replay", "proxy server from memory, no guard (floor)"),
          ("proxy", "replay", "idem-proxy, replays"),
          ("upstream", "fresh", "nginx straight (before fresh)"),
          ("proxy", "fresh", "idem-proxy, fresh keys")]


def load(path):
    """The runs (one JSON line each), or those of a report this script wrote before (to print or
    draw it again), with that report's context."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        earlier = json.loads(text)
        if isinstance(earlier, dict) and "runs" in earlier:
            return earlier["runs"], earlier.get("context", {})
    except json.JSONDecodeError:
        pass
    runs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        w = r.pop("wrk")
        if w.get("failed"):
            print(f"bench --proxy: run failed: {r}", file=sys.stderr)
            continue
        lat = w["latency_us"]
        r.update({"rps": w["rps"], "requests": w["requests"], "seconds": w["seconds"],
                  "p50_ms": lat["p50"] / 1000, "p99_ms": lat["p99"] / 1000,
                  "max_ms": lat["max"] / 1000, "socket_errors": w["socket_errors"],
                  "non_2xx": w["non_2xx"], "statuses": w.get("statuses", {})})
        runs.append(r)
    return runs, {}


def find(runs, target, scenario, connections):
    for r in runs:
        if (r["target"], r["scenario"], r["connections"]) == (target, scenario, connections):
            return r
    return None


def print_table(runs, connections):
    print(f"{'conns':>5}  {'scenario':<8} {'nginx rps':>10} {'p99 ms':>7}  {'proxy rps':>10} "
          f"{'p99 ms':>7}  {'ratio':>5}  {'load':>5}  errors")
    for c in connections:
        for scenario in ("replay", "fresh"):
            up, px = find(runs, "upstream", scenario, c), find(runs, "proxy", scenario, c)
            if not up or not px:
                continue
            errors = px["socket_errors"] + px["non_2xx"] + up["socket_errors"] + up["non_2xx"]
            fl = find(runs, "floor", scenario, c)
            floor = (f"  floor {fl['rps']:.0f} rps, replay {px['rps'] / fl['rps']:.2f}x it"
                     if fl else "")
            print(f"{c:>5}  {scenario:<8} {up['rps']:>10.0f} {up['p99_ms']:>7.2f}  "
                  f"{px['rps']:>10.0f} {px['p99_ms']:>7.2f}  {px['rps'] / up['rps']:>5.2f}  "
                  f"{px['load']:>5.2f}  {errors}{floor}")


def targets(runs, connections):
    print("targets:")
    ok_all = True
    for c in connections:
        up, px = find(runs, "upstream", "replay", c), find(runs, "proxy", "replay", c)
        if not up or not px:
            continue
        ratio = px["rps"] / up["rps"]
        ok = ratio >= REPLAY_TARGET and px["socket_errors"] + px["non_2xx"] == 0
        ok_all &= ok
        print(f"  {'met    ' if ok else 'NOT MET'}  replay at {c} connections >= "
              f"{REPLAY_TARGET}x straight: {ratio:.2f}x")
    return ok_all


def plot(runs, directory, context):
    if shutil.which("gnuplot") is None:
        print("bench --proxy: gnuplot not found, no plot drawn (Debian: gnuplot-nox)",
              file=sys.stderr)
        return
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, context["name"] + ".png")
    subtitle = (f"{context['cpus']} CPUs, load average {context['load_start'].split()[0]} at "
                f"start, {context['load_end'].split()[0]} at end, {context['date'][:16]}, "
                f"wrk {context['duration']} s a run, store {context['store']}, "
                f"cache {context.get('cache', '0')}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for target, scenario, title in SERIES:
            points = sorted((r["connections"], r["rps"], r["p99_ms"]) for r in runs
                            if (r["target"], r["scenario"]) == (target, scenario))
            if not points:
                continue
            data = os.path.join(tmp, f"{target}_{scenario}.dat")
            with open(data, "w", encoding="ascii") as f:
                f.write("".join(f"{c} {rps:.6g} {p99:.6g}\n" for c, rps, p99 in points))
            files.append((data, title, "dt 1" if target == "proxy" else "dt 2"))

        def clause(column):
            return ", ".join(f"'{d}' using 1:{column} with linespoints lw 2 {dt} title '{t}'"
                             for d, t, dt in files)
        script = f"""
set terminal pngcairo size 1500,560 font 'sans,10'
set output '{out}'
set multiplot layout 1,2 title "idem-proxy in front of nginx, and nginx straight, in one run: wrk against connections\\n{{/*0.8 {subtitle}}}"
set logscale x 2
set xrange [0.8:180]
set xtics (1, 32, 128)
set xlabel 'connections'
set grid
set key below vertical maxrows 3 noenhanced
set logscale y
set ylabel 'requests per second (log)'
set title 'throughput'
plot {clause(2)}
set ylabel 'p99 latency, ms (log)'
set title 'p99 latency'
plot {clause(3)}
unset multiplot
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"bench --proxy: plot in {out}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="OUT.json; OUT.csv is written beside it")
    parser.add_argument("--plots", help="directory for the plot (OUT's name, .png)")
    parser.add_argument("--load-start", default="")
    parser.add_argument("--load-end", default="")
    parser.add_argument("--duration", default="")
    parser.add_argument("--store", default="")
    parser.add_argument("--cache", default="0", help="the proxy's store.cache_entries")
    parser.add_argument("runs", help="the runs (JSON lines), or an earlier OUT.json to redo")
    args = parser.parse_args()

    runs, context = load(args.runs)
    connections = sorted({r["connections"] for r in runs})
    context = context or {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_start": args.load_start or "?",
        "load_end": args.load_end or "?",
        "duration": args.duration,
        "store": args.store,
        "cache": args.cache,
    }
    context["name"] = os.path.splitext(os.path.basename(args.out))[0]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"context": context, "runs": runs}, f, indent=1)
    csv_path = os.path.splitext(args.out)[0] + ".csv"
    columns = ["target", "scenario", "connections", "load", "rps", "p50_ms", "p99_ms", "max_ms",
               "socket_errors", "non_2xx", "statuses"]
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in runs:
            w.writerow([json.dumps(r[c]) if c == "statuses" else r[c] for c in columns])
    print(f"bench --proxy: {args.out}, {csv_path}", file=sys.stderr)
    print(f"load average {context['load_start']} at start, {context['load_end']} at end")
    print_table(runs, connections)
    targets(runs, connections)
    if args.plots:
        plot(runs, args.plots, context)


if __name__ == "__main__":
    main()
