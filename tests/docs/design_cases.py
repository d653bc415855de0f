#!/usr/bin/env python3
"""Every numbered section of docs/design.md names the conformance-kit cases that check it.

Fails when a section has no "Checked by:" line, names no case, or names a case that the kit
(include/idem/testing/*.hpp: the IDEM_..._CASE macros) does not have.
Usage: design_cases.py <repository root>
"""
import pathlib
import re
import sys


def kit_cases(root: pathlib.Path) -> set[str]:
    names = set()
    for header in (root / "include" / "idem" / "testing").rglob("*.hpp"):
        names.update(re.findall(r"IDEM_\w+_CASE\((\w+)\)", header.read_text()))
    names.discard("Name")  # the macros' own definitions
    return names


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    design = (root / "docs" / "design.md").read_text()
    cases = kit_cases(root)
    sections = re.split(r"(?m)^## (\d+)\. ", design)[1:]
    problems = []
    for number, body in zip(sections[0::2], sections[1::2]):
        checked = re.search(r"(?m)^Checked by: (.*)$", body)
        if not checked:
            problems.append(f"§{number} has no 'Checked by:' line")
            continue
        named = re.findall(r"`(\w+)`", checked.group(1))
        if not named:
            problems.append(f"§{number} names no case")
        for name in named:
            if name not in cases:
                problems.append(f"§{number} names {name}, which is not a case of the kit")
    for p in problems:
        print(f"docs/design.md: {p}")
    print(f"{len(sections) // 2} sections, {len(cases)} kit cases, {len(problems)} problems")
    return 1 if problems or not sections else 0


if __name__ == "__main__":
    sys.exit(main())
