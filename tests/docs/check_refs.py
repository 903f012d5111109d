#!/usr/bin/env python3
"""Every citation of a documentation section in the tree names one that exists.

Code comments, scripts and docs cite sections by path and quoted name, e.g.
docs/benchmarks.md "Tap packs", the path perhaps followed by a comma, several names joined by
commas, "and" or "or", across comment line breaks. Each cited file must exist and hold each name
(whitespace collapsed: a name may wrap in the Markdown). When a section moves (say, from
docs/benchmarks.md to the journal), this fails until every citation follows it. The dated
notebooks of docs/journal/ are not checked as citers: they keep the names of their time.
Usage: check_refs.py SOURCE_ROOT. Exit 0: all found; 1: a dead citation (each printed)."""
import os
import re
import sys

SKIP_DIRS = {".git", ".base", ".deps", "__pycache__", "_deps", "corpus", "golden", "node_modules"}
EXTS = {".c", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".md", ".txt", ".diff", ""}
# a comment line break: newline, indentation, and the next line's comment marker
CONTINUATION = re.compile(r"\n[ \t]*(?://+|#+|\*(?!/)|--)?[ \t]*")
CITATION = re.compile(r'(docs/[A-Za-z0-9_./-]+\.md)[,:]?[ \t]+((?:"[^"\n]{2,160}"'
                      r'(?:[ \t]*,[ \t]*|[ \t]+and[ \t]+|[ \t]+or[ \t]+)?)+)')
NAME = re.compile(r'"([^"\n]{2,160})"')


def collapse(text):
    return re.sub(r"\s+", " ", text)


def sources(root):
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")
                   and not (rel == "datasets" and x == "data")
                   and not (rel == "docs" and x == "journal")]
        for f in files:
            if os.path.splitext(f)[1] in EXTS:
                yield os.path.join(d, f)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    docs, dead, seen = {}, [], 0
    for path in sources(root):
        try:
            if os.path.getsize(path) > 4 << 20:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if "docs/" not in text:
            continue
        joined = CONTINUATION.sub(" ", text)
        for m in CITATION.finditer(joined):
            target = os.path.join(root, m.group(1))
            if target not in docs:
                try:
                    with open(target, encoding="utf-8") as f:
                        docs[target] = collapse(f.read())
                except OSError:
                    docs[target] = None
            for name in NAME.findall(m.group(2)):
                seen += 1
                body = docs[target]
                if body is None or collapse(name) not in body:
                    why = "no such file" if body is None else "no such section"
                    dead.append("%s: %s %r: %s" % (os.path.relpath(path, root), m.group(1),
                                                   name, why))
    for d in sorted(set(dead)):
        print(d)
    print("%d citations checked, %d dead" % (seen, len(set(dead))))
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
