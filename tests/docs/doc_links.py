#!/usr/bin/env python3
"""Checks that every relative link of the repository's Markdown files resolves.

A link [text](path) or [text](path#anchor) whose target is not a URL must name a file or folder
of the repository (relative to the document), and its anchor, if any, a heading of that file
(GitHub's slugs: lower case, punctuation dropped, spaces to hyphens). Prints each broken link
with its file and line, and fails when there is one.
"""
import pathlib
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """(number, line) of each line of `path` outside code fences."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def anchors_of(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            match = HEADING.match(line)
            if match:
                base = slug(match.group(1))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    skip = {".git"}
    broken = 0
    documents = [p for p in root.rglob("*.md")
                 if not any(part in skip or part.startswith("build") for part in
                            p.relative_to(root).parts)]
    for doc in sorted(documents):
        for number, line in prose_lines(doc):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # a URL (https:, mailto:)
                path_part, _, anchor = target.partition("#")
                path = (doc.parent / path_part).resolve() if path_part else doc
                where = f"{doc.relative_to(root)}:{number}: {target}"
                if not path.exists():
                    print(f"doc_links: {where}: no such file")
                    broken += 1
                elif root not in path.parents and path != root:
                    print(f"doc_links: {where}: outside the repository")
                    broken += 1
                elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
                    print(f"doc_links: {where}: no heading with the anchor #{anchor}")
                    broken += 1
    print(f"doc_links: {len(documents)} documents, {broken} broken link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
