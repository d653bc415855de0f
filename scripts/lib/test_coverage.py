#!/usr/bin/env python3
"""Checks that the test command runs every test of the suite once.

scripts/test runs each test of its optimised build (--all) either in the sanitized build
(--sanitized: the same test, by name, under ASan + UBSan) or in a stage of its own, chosen by
label (--labels: a regular expression over whole labels). A test that is in neither (a new test
executable the sanitizer build does not build, and no label for it) would run nowhere; this
names each such test and fails.
"""
import argparse
import json
import re
import subprocess
import sys


def tests_of(build):
    """Maps each test of a build folder to its labels."""
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    tests = {}
    for test in json.loads(listing)["tests"]:
        labels = []
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels = prop["value"]
        tests[test["name"]] = labels
    return tests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", required=True, help="the build folder with every test")
    parser.add_argument("--sanitized", required=True, help="the sanitized build folder")
    parser.add_argument("--labels", required=True, help="labels whose tests run elsewhere")
    args = parser.parse_args()

    elsewhere = re.compile(f"^({args.labels})$")
    everything = tests_of(args.all)
    sanitized = tests_of(args.sanitized)
    nowhere = sorted(name for name, labels in everything.items()
                     if name not in sanitized and not any(elsewhere.match(l) for l in labels))
    if nowhere:
        for name in nowhere:
            print(f"test_coverage: {name} (labels: {', '.join(everything[name]) or 'none'})")
        print(f"test_coverage: the {len(nowhere)} test(s) above run in no stage: the sanitized "
              f"build ({args.sanitized}) does not have them and none carries a label of "
              f"{args.labels}")
        return 1
    print(f"test_coverage: {len(everything)} tests: {len(sanitized)} in the sanitized build, "
          f"{len(everything) - len(sanitized)} by label; each runs in one stage")
    return 0


if __name__ == "__main__":
    sys.exit(main())
