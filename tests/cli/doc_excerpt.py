#!/usr/bin/env python3
"""Holds a documented output excerpt to the program's real output.

  doc_excerpt.py DOC.md SECTION OUTPUT [--command PREFIX]

Takes the fenced blocks of DOC.md under the heading SECTION (up to the next
heading). With --command, the block whose first line starts
with "$ PREFIX" (the command line is dropped); without it, the only block with no
info string. Every line of that block, except "..." lines, must appear in OUTPUT in
order. Times vary from run to run, so "(5.1 s)", "in 68.0 s" and "(8818 images/s)"
are compared as "(X s)", "in X s" and "(X images/s)". Exit 1 naming the first line
that is missing.
"""
import re
import sys


def mask(line):
    line = re.sub(r"\(\d+(\.\d+)? s\)", "(X s)", line)
    line = re.sub(r"in \d+(\.\d+)? s\b", "in X s", line)
    return re.sub(r"\(\d+ images/s\)", "(X images/s)", line)


def main():
    args = sys.argv[1:]
    command = None
    if "--command" in args:
        i = args.index("--command")
        command = args[i + 1]
        del args[i:i + 2]
    doc, section, output = args
    text = open(doc).read().splitlines()
    start = next((i for i, line in enumerate(text) if line.lstrip("#").strip() == section and line.startswith("#")), None)
    if start is None:
        sys.exit(f"{doc}: no heading {section!r}")
    blocks, block, info = [], None, ""
    for line in text[start + 1:]:
        if block is None and line.startswith("#"):
            break
        if line.startswith("```"):
            if block is None:
                block, info = [], line[3:].strip()
            else:
                blocks.append((info, block))
                block = None
        elif block is not None:
            block.append(line)
    if command is not None:
        found = [b for _, b in blocks if b and b[0].startswith("$ " + command)]
        excerpt = found[0][1:] if len(found) == 1 else None
    else:
        found = [b for info, b in blocks if info == ""]
        excerpt = found[0] if len(found) == 1 else None
    if excerpt is None:
        sys.exit(f"{doc}, {section}: expected one excerpt, found {len(found)}")
    real = [mask(line) for line in open(output).read().splitlines()]
    position = 0
    for line in excerpt:
        if line.strip() == "...":
            continue
        try:
            position = real.index(mask(line), position) + 1
        except ValueError:
            sys.exit(f"{doc}, {section}: line not in the output (in order): {line!r}")
    print(f"{doc}, {section}: {sum(1 for l in excerpt if l.strip() != '...')} lines found in order")


if __name__ == "__main__":
    main()
