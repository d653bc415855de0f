#!/usr/bin/env python3
"""Checks docs/architecture.md's "Adding a backend" checklist against the tree.

For every backend named in the top CMakeLists.txt's idem_backends(...) line:
- each file the checklist needs "always" exists in the backend's folders;
- the files a condition needs ("with an asynchronous face") exist all together or not at all;
and outside the backends' folders:
- the build (CMakeLists.txt but for that one line, cmake/, tools/idem/) names no backend;
- no core header (include/idem/ outside the backends' folders and the kit) includes a backend's.

  tests/docs/backend_checklist.py ROOT
"""
import pathlib
import re
import sys

BEGIN = "<!-- backend-checklist:begin -->"
END = "<!-- backend-checklist:end -->"


def backends(root):
    lines = [line for line in (root / "CMakeLists.txt").read_text().splitlines()
             if re.match(r"\s*idem_backends\(", line)]
    if len(lines) != 1 or not lines[0].rstrip().endswith(")"):
        raise SystemExit("backend_checklist: CMakeLists.txt needs one idem_backends(...) line, "
                         f"found {len(lines)}")
    return lines[0], lines[0].strip()[len("idem_backends("):-1].split()


def checklist(root):
    text = (root / "docs/architecture.md").read_text()
    found = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    if not found:
        raise SystemExit("backend_checklist: docs/architecture.md has no checklist table")
    rows = []
    for line in found.group(1).splitlines()[2:]:  # past the head and the rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[2]))
    return rows


def code_lines(path, comment):
    """The lines of a file with its comments cut (comment: '#' or '//')."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        yield number, line.split(comment, 1)[0] if comment else line


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    the_line, names = backends(root)
    rows = checklist(root)
    problems = []
    for name in names:
        by_condition = {}
        for template, needed in rows:
            path = template.replace("<backend>", name).replace("<BACKEND>", name.upper())
            if path == "CMakeLists.txt":
                continue  # the idem_backends line itself
            exists = (root / path).exists()
            if needed == "always" and not exists:
                problems.append(f"{name}: {path} is missing (needed always)")
            by_condition.setdefault(needed, []).append((path, exists))
        for needed, files in by_condition.items():
            if needed != "always" and len({e for _, e in files}) > 1:
                have = [p for p, e in files if e]
                lack = [p for p, e in files if not e]
                problems.append(f"{name} ({needed}): has {', '.join(have)} "
                                f"but not {', '.join(lack)}")

    alternation = "|".join(names + ["sql"])
    build_names = re.compile(rf"\bidem[_:]+({alternation})\b|IDEM_WITH_({alternation.upper()})\b"
                             rf"|\bidem/({alternation})/|\bsrc/({alternation})\b")
    build_files = [root / "CMakeLists.txt", *sorted((root / "cmake").rglob("*.cmake")),
                   *sorted((root / "cmake").rglob("*.in")), *sorted((root / "tools/idem").iterdir())]
    for path in build_files:
        comment = "#" if path.suffix in (".cmake", ".in", ".txt") else "//"
        for number, line in code_lines(path, comment):
            if path.name == "CMakeLists.txt" and path.parent == root and line.strip() == the_line.strip():
                continue
            if build_names.search(line):
                problems.append(f"{path.relative_to(root)}:{number} names a backend: {line.strip()}")

    include = re.compile(rf'#\s*include\s*[<"]idem/({alternation})/')
    own = re.compile(rf"include/idem/({alternation}|testing)/")
    for path in sorted((root / "include/idem").rglob("*.hpp")):
        relative = str(path.relative_to(root))
        if own.match(relative):
            continue
        for number, line in code_lines(path, None):
            if include.search(line):
                problems.append(f"{relative}:{number}: a core header includes a backend's: "
                                f"{line.strip()}")

    for problem in problems:
        print(f"backend_checklist: {problem}")
    if problems:
        return 1
    print(f"backend_checklist: {len(names)} backends ({', '.join(names)}) match the "
          f"{len(rows)} rows of the checklist; the build and the core name none of them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
