#!/usr/bin/env python3
"""Lists functions over 100 lines and files over 900 lines (issue 40, item 3).

usage: .ci/long_fns.py [--max-fn N] [--max-file N] [--top N] [PATH ...]
       (default paths: src crates; run from the repository's root)

Exits 1 and lists the offenders if any function outside tests is longer than
--max-fn lines (default 100) or any .rs file is longer than --max-file lines
(default 900); exits 0 otherwise. --top N also prints the N longest functions.

How a function is counted: from the line holding its `fn` keyword through
the line holding the body's closing brace, both included, so the signature,
blank lines and comments inside count; the doc comment and attributes above
do not. The body is found by brace matching on the source with comments,
string, raw-string and char literals blanked out first (lifetimes are told
from char literals by the missing closing quote). A nested function or a
closure counts inside its enclosing function and, if named, on its own too.
Declarations without a body (`fn f();` in a trait or extern block) and
function-pointer types (`fn(u8) -> u8`) are not functions here.

What counts as a test, and is skipped for the function limit: an item under
`#[cfg(test)]` (or `#[cfg(all(test, ...))]`), a `#[test]`/`#[tokio::test]`
function, a file that a `#[cfg(test)] mod name;` declares (and the files
below it), and anything under a `tests/`, `benches/` or `examples/` folder.
The file limit applies to every .rs file, tests included.
"""

import argparse
import os
import re
import sys


def blank(src):
    """The source with comments and literal contents replaced by spaces.

    Newlines are kept, so offsets map to the same lines as the original.
    """
    out = list(src)
    i, n = 0, len(src)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif re.match(r'b?r#*"', src[i : i + 260]) and not _ident_before(src, i):
            m = re.match(r'(b?r)(#*)"', src[i:])
            close = '"' + m.group(2)
            j = src.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            wipe(i + m.end(), j - len(close))
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and not _ident_before(src, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            wipe(i + 1, j)
            i = j + 1
        elif c == "'" or (c == "b" and src.startswith("b'", i) and not _ident_before(src, i)):
            start = i + (2 if c == "b" else 1)
            m = re.match(r"(\\(x..|u\{[0-9a-fA-F_]*\}|.)|[^\\\n])'", src[start : start + 16])
            if m:
                wipe(start, start + m.end() - 1)
                i = start + m.end()
            else:
                i = start  # a lifetime or a label
        else:
            i += 1
    return "".join(out)


def _ident_before(src, i):
    return i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")


def match_brace(code, i):
    """The offset of the brace closing the one at offset i."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def item_end(code, i):
    """From offset i, the end of the next item: its `;` or its closing brace."""
    depth = 0
    for j in range(i, len(code)):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return j
        elif depth == 0 and ch == "{":
            return match_brace(code, j)
    return len(code) - 1


TEST_ATTR = re.compile(
    r"#\[\s*(cfg\s*\(\s*(test|all\s*\(\s*test\b[^\]]*)\s*\)|(\w+\s*::\s*)*test\b[^\]]*)\s*\]"
)
TEST_MOD = re.compile(r"#\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
FN = re.compile(r"\bfn\s+(r#)?([A-Za-z_]\w*)")


def test_spans(code):
    """Offsets [a, b) of the items that only exist in tests."""
    spans = []
    for m in TEST_ATTR.finditer(code):
        if any(a <= m.start() < b for a, b in spans):
            continue
        spans.append((m.start(), item_end(code, m.end()) + 1))
    return spans


def functions(code):
    """(name, first line, last line) of every function with a body outside tests."""
    spans = test_spans(code)
    found = []
    for m in FN.finditer(code):
        if any(a <= m.start() < b for a, b in spans):
            continue
        depth, body = 0, None
        for j in range(m.end(), len(code)):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch == ";":
                break
            elif depth == 0 and ch == "{":
                body = j
                break
        if body is None:
            continue
        end = match_brace(code, body)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        found.append((m.group(2), first, last))
    return found


def module_dir(path):
    """The folder where the `mod x;` declarations of the file at path live."""
    base = os.path.basename(path)
    if base in ("mod.rs", "lib.rs", "main.rs"):
        return os.path.dirname(path)
    return os.path.splitext(path)[0]


def is_test_path(path, test_files):
    parts = path.split(os.sep)
    if any(p in ("tests", "benches", "examples") for p in parts):
        return True
    return any(path == t or path.startswith(os.path.splitext(t)[0] + os.sep) for t in test_files) or any(
        os.path.basename(t) == "mod.rs" and path.startswith(os.path.dirname(t) + os.sep) for t in test_files
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["src", "crates"])
    ap.add_argument("--max-fn", type=int, default=100)
    ap.add_argument("--max-file", type=int, default=900)
    ap.add_argument("--top", type=int, default=0)
    args = ap.parse_args()

    files = []
    for root in args.paths:
        if os.path.isfile(root):
            files.append(os.path.normpath(root))
            continue
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in ("target", "vendor", ".git"))
            files += [os.path.normpath(os.path.join(d, x)) for x in sorted(names) if x.endswith(".rs")]

    codes = {}
    test_files = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            codes[path] = (src := f.read()), blank(src)
        for m in TEST_MOD.finditer(codes[path][1]):
            base = module_dir(path)
            for cand in (os.path.join(base, m.group(3) + ".rs"), os.path.join(base, m.group(3), "mod.rs")):
                test_files.add(os.path.normpath(cand))

    long_files, fns = [], []
    for path in files:
        src, code = codes[path]
        lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
        if lines > args.max_file:
            long_files.append((lines, path))
        if is_test_path(path, test_files):
            continue
        for name, first, last in functions(code):
            fns.append((last - first + 1, path, first, name))

    fns.sort(key=lambda t: (-t[0], t[1], t[2]))
    if args.top:
        print(f"the {args.top} longest functions outside tests:")
        for n, path, line, name in fns[: args.top]:
            print(f"  {n:5d}  {path}:{line}  {name}")
    long_fns = [t for t in fns if t[0] > args.max_fn]
    for n, path, line, name in long_fns:
        print(f"function over {args.max_fn} lines: {path}:{line} {name} ({n} lines)")
    for n, path in sorted(long_files, reverse=True):
        print(f"file over {args.max_file} lines: {path} ({n} lines)")
    if long_fns or long_files:
        return 1
    print(f"no function over {args.max_fn} lines outside tests, no file over {args.max_file} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
