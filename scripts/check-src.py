#!/usr/bin/env python3
"""`make check-src`: rules of the source tree that a compiler does not check.

1. format: every C file is as the committed .clang-format writes it
   (clang-format --dry-run --Werror).
2. banned functions: sprintf/vsprintf, strcpy/strcat, gets everywhere; in
   src/ also atoi & co. and raw strto* outside the strict parsers
   (src/base/parse.c, src/base/quantity.c and the JSON/YAML reader), so every
   number a person or a peer writes goes through base/parse.h; raw
   malloc/calloc/realloc/strdup/strndup in the daemons (src/net, store,
   server, agent, gateway, worker, cli, k8s), which allocate through
   base/alloc.h.
3. tests link the component libraries: no `#include "x.c"`.
5. no import circle between the files of a folder of src/: file A imports
   B when it calls a function (or uses a name) that B defines; files that
   import each other in a loop are one thing cut in two, and are refused.
   (A folder being split by someone else's work in progress may be listed
   in PENDING with the reason.)
4. unused exported functions: a function of src/ that is not static must be
   used by another file (src, tests, bench or fuzz; a use inside a header's
   macro counts); otherwise it should be static, or go. The public API of
   libstarcloud (declared in include/starcloud/) is exempt.

Prints one line per finding (file:line: rule: what) and exits 1 if any.
Usage: scripts/check-src.py [--no-format] [ROOT]"""
import os
import re
import shutil
import subprocess
import sys

DAEMONS = ("src/net/", "src/store/", "src/server/", "src/agent/", "src/gateway/",
           "src/worker/", "src/cli/", "src/k8s/")
# The only places that may call strto* directly: the strict parsers, and the
# JSON/YAML reader, which turns scalars into numbers exactly as YAML 1.2 does.
STRTO_OK = ("src/base/parse.c", "src/base/quantity.c", "src/base/yamljson.c")
# (pattern, applies to paths starting with, except these files, why)
BANNED = [
    (re.compile(r"\b(atoi|atol|atoll|atof)\s*\("), "src/", (), "use sc_parse_* (base/parse.h)"),
    (re.compile(r"\b(sprintf|vsprintf)\s*\("), "", (), "use snprintf"),
    (re.compile(r"\b(strcpy|strcat|gets)\s*\("), "", (), "use snprintf or memcpy with a bound"),
    (re.compile(r"\b(strtol|strtoul|strtoll|strtoull|strtod|strtof|strtold|strtoimax|"
                r"strtoumax)\s*\("), "src/", STRTO_OK, "use sc_parse_* (base/parse.h)"),
]
INCLUDE_C = re.compile(r'^\s*#\s*include\s*"[^"]+\.c"')
RAW_ALLOC = re.compile(r"(?<![\w.>])(malloc|calloc|realloc|reallocarray|strdup|strndup)\s*\(")
ENTRY_POINTS = {"main", "LLVMFuzzerTestOneInput", "LLVMFuzzerInitialize"}
# Findings left on purpose for now, each with its reason: files that another
# piece of work is rewriting at the moment, converted once it lands.
PENDING = {
}


def c_files(root):
    out = []
    for top in ("src", "include", "tests/unit", "tests/e2e", "bench", "fuzz"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def strip_code(text):
    """Blanks comments and string/char literals, keeping lines and columns."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_format(root, files):
    exe = shutil.which("clang-format")
    if not exe:
        return ["clang-format: not installed (scripts/deps.sh installs it)"]
    p = subprocess.run([exe, "--dry-run", "--Werror"] + files, cwd=root,
                       capture_output=True, text=True)
    if p.returncode == 0:
        return []
    found = []
    for line in p.stderr.splitlines():
        m = re.match(r"(.+?):(\d+):\d+: (?:error|warning): code should be clang-formatted", line)
        if m:
            found.append("%s:%s: format: differs from .clang-format (make format)" %
                         (os.path.relpath(m.group(1), root), m.group(2)))
    return found or ["format: clang-format failed: " + p.stderr.strip()[:300]]


def check_banned(path, code, raw):
    found = []
    daemon = path.startswith(DAEMONS)
    for ln, line in enumerate(raw.split("\n"), 1):
        if INCLUDE_C.match(line):
            found.append("%s:%d: include of a .c file (link the component's library)" %
                         (path, ln))
    for ln, line in enumerate(code.split("\n"), 1):
        for rx, under, allowed, why in BANNED:
            m = rx.search(line)
            if m and path.startswith(under) and path not in allowed:
                found.append("%s:%d: banned: %s (%s)" % (path, ln, m.group(1), why))
        if daemon:
            m = RAW_ALLOC.search(line)
            if m:
                found.append("%s:%d: banned: raw %s in a daemon (use sc_x%s or sc_%s, "
                             "base/alloc.h)" % (path, ln, m.group(1), m.group(1), m.group(1)))
    return found


DEF_START = re.compile(r"^(?!static\b|extern\b|typedef\b|struct\b|enum\b|union\b|#|\s|\}|/)"
                       r"[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(")


def definitions(code):
    """Non-static function definitions: (name, line). Formatted code puts a
    definition's '{' alone at the start of a line after its head."""
    lines = code.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = DEF_START.match(line)
        if not m:
            continue
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith((")", "{", ";")):
            j += 1
        if j < len(lines) and lines[j].rstrip().endswith(";"):
            continue
        if j + 1 < len(lines) and lines[j + 1].startswith("{"):
            out.append((m.group(1), i + 1))
    return out


def macro_text(code):
    """The #define lines of a header, with their continuation lines."""
    out, on = [], False
    for line in code.split("\n"):
        if line.lstrip().startswith("#define"):
            on = True
        if on:
            out.append(line)
            on = line.rstrip().endswith("\\")
    return "\n".join(out)


def check_unused(files, codes):
    defined = {}
    for path in files:
        if path.endswith(".c") and path.startswith("src/"):
            for name, ln in definitions(codes[path]):
                defined.setdefault(name, (path, ln))
    public = set()
    for path in files:
        if path.startswith("include/starcloud/"):
            public |= set(re.findall(r"[A-Za-z_]\w*", codes[path]))
    words = {}
    for path in files:
        text = codes[path] if path.endswith(".c") else macro_text(codes[path])
        for w in set(re.findall(r"[A-Za-z_]\w*", text)):
            words.setdefault(w, set()).add(path)
    found = []
    for name, (path, ln) in sorted(defined.items()):
        if name in ENTRY_POINTS or name in public:
            continue
        users = words.get(name, set()) - {path}
        if not users:
            found.append("%s:%d: unused export: %s is used by no other file (make it "
                         "static, or remove it)" % (path, ln, name))
    return found


def circles(files, codes, raws):
    """Import circles inside each folder of src/ (Tarjan's strongly
    connected components over file -> file edges)."""
    defs = {}
    for path in files:
        if path.endswith(".c") and path.startswith("src/"):
            for name, _ in definitions(codes[path]):
                defs.setdefault(name, path)
    found = []
    folders = sorted({os.path.dirname(f) for f in files if f.startswith("src/") and f.endswith(".c")})
    for folder in folders:
        mine = [f for f in files if os.path.dirname(f) == folder and f.endswith(".c")]
        edges = {f: {} for f in mine}
        for f in mine:
            words = set(re.findall(r"[A-Za-z_]\w*", codes[f]))
            for w in words:
                g = defs.get(w)
                if g and g != f and g in edges:
                    edges[f].setdefault(g, []).append(w)
        index, low, stack, on, comps = {}, {}, [], set(), []

        def visit(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in edges[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

        for v in sorted(edges):
            if v not in index:
                visit(v)
        for comp in comps:
            ties = ["%s -> %s (%s)" % (os.path.basename(a), os.path.basename(b),
                                       ", ".join(sorted(edges[a][b])[:3]))
                    for a in comp for b in sorted(edges[a]) if b in comp]
            found.append("%s: circle: import circle between %s: %s" %
                         (folder, ", ".join(os.path.basename(c) for c in comp), "; ".join(ties)))
    return found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = c_files(root)
    codes, raws = {}, {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            raws[f] = fh.read()
            codes[f] = strip_code(raws[f])
    found = []
    if "--no-format" not in sys.argv:
        found += check_format(root, files)
    for f in files:
        found += check_banned(f, codes[f], raws[f])
    found += check_unused(files, codes)
    found += circles(files, codes, raws)
    found = [f for f in found
             if f.split(":")[0] not in PENDING and
             not any(" %s " % name in f for name in PENDING if not name.startswith("src/"))]
    for line in found:
        print(line)
    print("check-src: %d files, %d findings" % (len(files), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
