#!/usr/bin/env python3
"""Report of scripts/bench --http: reads its runs (one JSON line each), writes OUT.json and
OUT.csv, prints the table and where the targets stand, and draws throughput and p99 against
connections for each backend (docs/perf/http_<backend>.png).
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

SCENARIOS = ["health", "fresh", "replay", "mix", "duplicates"]
BARE = ["health", "fresh"]
BACKEND_NAMES = {"sqlite": "SQLite", "pg_redis": "PostgreSQL + Redis"}


def load(path):
    """The runs of scripts/lib/bench_http.sh (one JSON line each), or those of a report this script
    wrote before (to print or draw it again), with that report's context."""
    with open(path) as f:
        text = f.read()
    try:
        earlier = json.loads(text)
        if isinstance(earlier, dict) and "runs" in earlier:
            return earlier["runs"], earlier.get("context", {})
    except json.JSONDecodeError:
        pass
    runs = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        w = r.pop("wrk")
        if w.get("failed"):
            print(f"bench --http: run failed: {r}", file=sys.stderr)
            continue
        lat = w["latency_us"]
        r.update({
            "rps": w["rps"], "requests": w["requests"], "seconds": w["seconds"],
            "p50_ms": lat["p50"] / 1000, "p90_ms": lat["p90"] / 1000,
            "p99_ms": lat["p99"] / 1000, "max_ms": lat["max"] / 1000,
            "socket_errors": w["socket_errors"], "non_2xx": w["non_2xx"],
            "statuses": w.get("statuses", {}),
        })
        runs.append(r)
    return runs, {}


def find(runs, backend, mode, scenario, connections, note=""):
    for r in runs:
        if (r["backend"], r["mode"], r["scenario"], r["connections"], r["note"]) == \
                (backend, mode, scenario, connections, note):
            return r
    return None


def fmt_rps(x):
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def fmt_ms(x):
    return f"{x:.2f} ms" if x < 10 else f"{x:.0f} ms"


def cell(r):
    return "–" if r is None else f"{fmt_rps(r['rps'])} / {fmt_ms(r['p99_ms'])}"


def errors(r):
    """Socket errors and answers that should not be: 5xx anywhere, non-2xx outside duplicates
    (where 409 is the expected answer to a duplicate in flight)."""
    bad = r["socket_errors"]
    if r["scenario"] == "duplicates":
        bad += sum(n for status, n in r["statuses"].items() if int(status) >= 500)
    else:
        bad += r["non_2xx"]
    return bad


def print_table(runs, backends, connections):
    print("\nreq/s / p99 (wrk, 2 threads)\n")
    head = SCENARIOS + [f"bare {s}" for s in BARE]
    print("| backend | conns | " + " | ".join(head) + " | load |")
    print("|---|---:|" + "---:|" * len(head) + "---:|")
    for b in backends:
        for c in connections:
            cells = [cell(find(runs, b, "guard", s, c)) for s in SCENARIOS]
            cells += [cell(find(runs, b, "bare", s, c)) for s in BARE]
            loads = [r["load"] for r in runs if r["backend"] == b and r["connections"] == c]
            load = f"{max(loads):.1f}" if loads else "–"
            print(f"| {BACKEND_NAMES.get(b, b)} | {c} | " + " | ".join(cells) + f" | {load} |")
    print("\nduplicates: answers by status")
    for r in runs:
        if r["scenario"] == "duplicates":
            counts = ", ".join(f"{s}: {n}" for s, n in sorted(r["statuses"].items()))
            print(f"  {r['backend']} {r['connections']} connections: {counts}")
    slow = [r for r in runs if r["note"]]
    if slow:
        print("\nwith 64 slow clients connected (32 connections)\n")
        print("| backend | scenario | req/s | p99 | max | errors |")
        print("|---|---|---:|---:|---:|---:|")
        for r in slow:
            print(f"| {BACKEND_NAMES.get(r['backend'], r['backend'])} | {r['scenario']} | "
                  f"{fmt_rps(r['rps'])} | {fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} | "
                  f"{errors(r)} |")


def targets(runs, backends):
    print("\ntargets (32 connections)\n")
    lines = []
    for b in backends:
        name = BACKEND_NAMES.get(b, b)
        health = find(runs, b, "guard", "health", 32)
        replay = find(runs, b, "guard", "replay", 32)
        fresh = find(runs, b, "guard", "fresh", 32)
        bare = find(runs, b, "bare", "fresh", 32)
        if health:
            lines.append((f"{name}: GET /health >= 20k req/s", f"{fmt_rps(health['rps'])}",
                          health["rps"] >= 20000))
        if health and replay:
            ratio = replay["rps"] / health["rps"]
            lines.append((f"{name}: replay >= 0.8 x health", f"{ratio:.2f}", ratio >= 0.8))
        if fresh and bare:
            ratio = fresh["rps"] / bare["rps"]
            lines.append((f"{name}: fresh >= 0.75 x bare twin", f"{ratio:.2f}", ratio >= 0.75))
        if fresh:
            lines.append((f"{name}: fresh p99 <= 25 ms", fmt_ms(fresh["p99_ms"]),
                          fresh["p99_ms"] <= 25))
        at128 = [r for r in runs if r["backend"] == b and r["connections"] == 128]
        if at128:
            bad = sum(errors(r) for r in at128)
            lines.append((f"{name}: 128 connections, no errors", f"{bad} errors", bad == 0))
        for r in runs:
            if r["backend"] == b and r["note"]:
                lines.append((f"{name}: {r['scenario']} with 64 slow clients, max <= 100 ms",
                              fmt_ms(r["max_ms"]), r["max_ms"] <= 100 and errors(r) == 0))
    for what, value, ok in lines:
        print(f"  {'met    ' if ok else 'NOT MET'}  {what}: {value}")


def plot(runs, backends, directory, context):
    if shutil.which("gnuplot") is None:
        print("bench --http: gnuplot not found, no plots drawn (Debian: gnuplot-nox)",
              file=sys.stderr)
        return
    os.makedirs(directory, exist_ok=True)
    subtitle = (f"{context['cpus']} CPUs, load average {context['load_start'].split()[0]} at "
                f"start, {context['load_end'].split()[0]} at end, {context['date'][:16]}, "
                f"wrk {context['duration']} s a run")
    series = [("guard", s, s) for s in SCENARIOS] + [("bare", s, f"bare twin {s}") for s in BARE]
    drawn = []
    with tempfile.TemporaryDirectory() as tmp:
        for b in backends:
            files = []
            for mode, scenario, title in series:
                points = sorted((r["connections"], r["rps"], r["p99_ms"]) for r in runs
                                if (r["backend"], r["mode"], r["scenario"], r["note"]) ==
                                (b, mode, scenario, ""))
                if not points:
                    continue
                data = os.path.join(tmp, f"{b}_{mode}_{scenario}.dat")
                with open(data, "w") as f:
                    f.write("".join(f"{c} {rps:.6g} {p99:.6g}\n" for c, rps, p99 in points))
                files.append((data, title, "dt 2" if mode == "bare" else "dt 1"))
            if not files:
                continue
            out = os.path.join(directory, f"http_{b}.png")

            def clause(column):
                return ", ".join(f"'{d}' using 1:{column} with linespoints lw 2 {dt} "
                                 f"title '{t}'" for d, t, dt in files)
            script = f"""
set terminal pngcairo size 1500,560 font 'sans,10'
set output '{out}'
set multiplot layout 1,2 title "idem, the HTTP payments example on {BACKEND_NAMES.get(b, b)}: wrk against connections\\n{{/*0.8 {subtitle}}}"
set logscale x 2
set xrange [0.8:180]
set xtics (1, 8, 32, 128)
set xlabel 'connections'
set grid
set key outside right top vertical noenhanced
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
            drawn.append(out)
    if drawn:
        print("bench --http: plots in " + ", ".join(drawn), file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="OUT.json; OUT.csv is written beside it")
    parser.add_argument("--plots", help="directory for the PNG plots")
    parser.add_argument("--load-start", default="")
    parser.add_argument("--load-end", default="")
    parser.add_argument("--duration", default="")
    parser.add_argument("runs", help="the runs (JSON lines), or an earlier OUT.json to redo")
    args = parser.parse_args()

    runs, context = load(args.runs)
    backends = [b for b in BACKEND_NAMES if any(r["backend"] == b for r in runs)]
    connections = sorted({r["connections"] for r in runs if not r["note"]})
    context = context or {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_start": args.load_start or "?",
        "load_end": args.load_end or "?",
        "duration": args.duration,
    }
    with open(args.out, "w") as f:
        json.dump({"context": context, "runs": runs}, f, indent=1)
    csv_path = os.path.splitext(args.out)[0] + ".csv"
    columns = ["backend", "mode", "scenario", "connections", "note", "load", "rps", "p50_ms",
               "p90_ms", "p99_ms", "max_ms", "socket_errors", "non_2xx", "statuses"]
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in runs:
            w.writerow([json.dumps(r[c]) if c == "statuses" else r[c] for c in columns])
    print(f"bench --http: {args.out}, {csv_path}", file=sys.stderr)
    print_table(runs, backends, connections)
    targets(runs, backends)
    if args.plots:
        plot(runs, backends, args.plots, context)


if __name__ == "__main__":
    main()
