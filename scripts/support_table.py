#!/usr/bin/env python3
"""The support table of docs/stores.md, generated from the cases each store registers.

Each conformance binary given is asked for its tests (--gtest_list_tests; nothing runs, no server
is needed): a cell is a store in a mode ("<Cell>/RecordStoreConformance"), and it claims an ability
exactly when the kit registered the cases that check it (the kit registers a case only where the
store's traits and type claim what it needs). So the table cannot say more than is checked.

  scripts/support_table.py BINARY...                   print the table
  scripts/support_table.py --check docs/stores.md BINARY...
                                                       fail when the table between the markers of
                                                       docs/stores.md is not the generated one
"""
import argparse
import pathlib
import re
import subprocess
import sys

BEGIN = "<!-- support-table:begin (scripts/support_table.py writes this table) -->"
END = "<!-- support-table:end -->"

# The table's first rows, in this order, with the name docs use for each cell; a cell not named
# here (a new backend's) follows them under its own name.
CELLS = {
    "Memory": "memory",
    "CachedMemory": "memory behind a `CachedStore`",
    "SqliteLease": "SQLite, lease mode",
    "SqliteTransactional": "SQLite, transactional mode",
    "GroupedSqlite": "SQLite behind a `GroupCommitStore`",
    "PostgresLease": "PostgreSQL, lease mode",
    "PostgresTransactional": "PostgreSQL, transactional mode",
    "Redis": "Redis",
    "RedisCluster": "Redis Cluster",
    "AsyncRedis": "`AsyncRedisStore`",
    "AsyncRedisCluster": "`AsyncRedisStore` on a cluster",
    "AsyncRedisClusterDurable": "`AsyncRedisStore` on a cluster, durable (`WAIT`)",
    "AsyncPostgres": "`AsyncPostgresStore`",
    "AsyncSqlite": "`sqlite::AsyncStore`",
    "CachedAsyncSqlite": "`sqlite::AsyncStore` behind an `AsyncCachedStore`",
}

FACES = [
    ("ExecuteFace", "`execute`"),
    ("TwoPhaseFace", "`begin`"),
    ("BatchFace", "batch"),
    ("LayeredFace", "layered"),
    ("CachedFace", "cached"),
    ("GroupedFace", "grouped"),
    ("AsyncFace", "async"),
]

# An ability, and the case whose registration says the cell claims it.
ABILITIES = [
    ("takeover", "ExecuteFace.ALapsedLeaseIsATakeoverEvenWhenTheTtlIsShorter"),
    ("rewind", "RecordStoreConformance.RewindKeepsTheKeyHeldAndAFailureCommitsAfterIt"),
    ("steps", "RecordStoreConformance.StepsComeBackInOrderToTheKeysNextHolder"),
    ("completer", "RecordStoreConformance.AKeptRequestIsFoundOnceItsRunIsAbandoned"),
    ("reopen", "RecordStoreConformance.RecordsOutliveTheStoreThatWroteThem"),
    ("admin", "ExecuteFace.AForgottenRecordIsNeverReplayed"),
]


def registered(binaries):
    """{cell: set of "Suite.Case" names} from the binaries' test lists."""
    cells = {}
    for binary in binaries:
        listing = subprocess.run([binary, "--gtest_list_tests"], check=True, capture_output=True,
                                 text=True).stdout
        suite = None
        for line in listing.splitlines():
            if not line.startswith(" "):
                suite = line.strip().rstrip(".")
                continue
            if suite is None or "/" not in suite:
                continue
            cell, face = suite.split("/", 1)
            if face != "RecordStoreConformance" and face not in dict(FACES):
                continue  # another suite of the binary (typed suites share the "<P>/<S>" form)
            name = line.strip().split()[0]
            cells.setdefault(cell, set()).add(f"{face}.{name}")
    # A cell is a store the record cases ran on.
    return {cell: cases for cell, cases in cells.items()
            if any(c.startswith("RecordStoreConformance.") for c in cases)}


def table(cells):
    heads = ["cell"] + [h for _, h in FACES] + [a for a, _ in ABILITIES]
    rows = ["| " + " | ".join(heads) + " |", "|" + "|".join(["---"] + [":-:"] * (len(heads) - 1)) + "|"]
    labels = {cell: label for cell, label in CELLS.items() if cell in cells}
    labels.update({cell: cell for cell in sorted(set(cells) - set(CELLS))})
    for cell, label in labels.items():
        cases = cells[cell]
        faces = ["yes" if any(c.startswith(f + ".") for c in cases) else "–" for f, _ in FACES]
        abilities = ["yes" if case in cases else "–" for _, case in ABILITIES]
        rows.append("| " + " | ".join([label] + faces + abilities) + " |")
    return "\n".join(rows) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", type=pathlib.Path)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    cells = registered(args.binaries)
    generated = table(cells)
    if args.check is None:
        sys.stdout.write(generated)
        return 0
    text = args.check.read_text()
    found = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    if not found:
        print(f"support_table: {args.check} has no table between the markers", file=sys.stderr)
        return 1
    if found.group(1) != generated:
        print(f"support_table: {args.check}'s table differs from what the cases say; it should be:")
        sys.stdout.write(generated)
        return 1
    print(f"support_table: {args.check} matches the {len(cells)} cells' registered cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
