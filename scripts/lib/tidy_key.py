#!/usr/bin/env python3
"""The key of one clang-tidy run, for scripts/style's cache of clean files.

  tidy_key.py BUILD FILE TOOL_VERSION HEADER_FILTER CONFIG...

Prints a SHA-256 over what the run's findings depend on: the file's compile command and the file
preprocessed with it from BUILD/compile_commands.json (so every header it includes, and every macro
and flag, is in it), the tool's version, the header filter and the contents of the CONFIG files
(.clang-tidy). The repository's and the build folder's own paths are taken out, so that another
clone of the same sources has the same keys. Exits 1 when the file has no compile command or does
not preprocess: no key, no cached answer.
"""
import hashlib
import json
import pathlib
import shlex
import subprocess
import sys


def preprocess_command(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-o"):
            continue
        out.append(a)
    if out and out[0].endswith("ccache"):
        out = out[1:]
    return out + ["-E", "-o", "-"]


def main():
    build, file, version, header_filter, *configs = sys.argv[1:]
    entries = json.loads(pathlib.Path(build, "compile_commands.json").read_text())
    entry = next((e for e in entries if e["file"] == file), None)
    if entry is None:
        return 1
    command = preprocess_command(entry)
    run = subprocess.run(command, cwd=entry["directory"],
                         capture_output=True, check=False)
    if run.returncode != 0:
        return 1
    root = str(pathlib.Path(__file__).resolve().parents[2])
    build_dir = str(pathlib.Path(build).resolve())
    text = run.stdout.replace(build_dir.encode(), b"<build>").replace(root.encode(), b"<root>")
    header_filter = header_filter.replace(root, "<root>")
    h = hashlib.sha256()
    flags = " ".join(command).replace(build_dir, "<build>").replace(root, "<root>")
    for part in (version.encode(), header_filter.encode(), flags.encode(), text):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    for config in configs:
        data = pathlib.Path(config).read_bytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    print(h.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
