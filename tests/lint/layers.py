#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The folders of src/ are the architecture: each uses only the folders
below it in LAYERS (docs/architecture.md).  Two readings, each fails on a
use that climbs, a back-edge between folders (within a folder anything
goes):

  - includes: every `#include "agentbox/NAME.h"` and `#include "NAME.h"` in
    src/ and include/agentbox/, a header belonging to the folder of NAME.c;
  - links (with --objs DIR, the build's obj/ tree): every symbol an object
    file uses (nm) and the folder of the object that defines it, so a
    function declared in one folder's header but defined in another's is
    caught too.

    python3 tests/lint/layers.py [--objs build/obj] [--graph]
"""

import os
import re
import subprocess
import sys

# bottom first
LAYERS = ["base", "parse", "config", "kernel", "creds", "plan", "observe", "egress",
          "sandbox", "escape", "escape/probes", "escape/lab", "cli"]

# headers with no NAME.c: the folder they belong to
HEADER_HOME = {"escape": "escape", "report": "observe"}

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INC = re.compile(r'^\s*#\s*include\s+"(agentbox/)?([A-Za-z0-9_./]+)\.h"', re.M)


def folder_of(path):
    rel = os.path.relpath(path, os.path.join(TOP, "src"))
    d = os.path.dirname(rel)
    return d if d in LAYERS else None


def link_edges(objs, rank, edges, bad):
    defined, used = {}, []
    for root, _, names in os.walk(objs):
        for n in names:
            if not n.endswith(".o") or n == "main-ablate.o":
                continue
            p = os.path.join(root, n)
            f = os.path.relpath(root, objs)
            if f not in rank:
                continue
            out = subprocess.run(["nm", "--defined-only", "-g", p], stdout=subprocess.PIPE,
                                 text=True, check=True).stdout
            for line in out.splitlines():
                defined.setdefault(line.split()[-1], (f, n))
            out = subprocess.run(["nm", "-u", p], stdout=subprocess.PIPE, text=True,
                                 check=True).stdout
            used += [(f, n, line.split()[-1]) for line in out.splitlines()]
    if not defined:
        bad.append("no object files under %s (build first)" % objs)
    for f, n, sym in used:
        if sym not in defined:
            continue  # a library's
        g, m = defined[sym]
        if g == f:
            continue
        edges.add((f, g))
        if rank[g] > rank[f]:
            bad.append("%s/%s (%s) calls %s, defined in %s/%s (%s)" % (f, n, f, sym, g, m, g))


def main():
    rank = {f: i for i, f in enumerate(LAYERS)}
    files = []     # (path, folder)
    sources = {}   # module name -> the folders of its NAME.c files
    for root, _, names in os.walk(os.path.join(TOP, "src")):
        for n in names:
            p = os.path.join(root, n)
            if not n.endswith((".c", ".h")):
                continue
            f = folder_of(p)
            if f is None:
                print("layers: %s is in no layer (add its folder to LAYERS)" %
                      os.path.relpath(p, TOP))
                return 1
            files.append((p, f))
            if n.endswith(".c"):
                sources.setdefault(n[:-2], set()).add(f)
    # a public header belongs to the folder of its NAME.c (HEADER_HOME when
    # it has none, or when two folders have one)
    public = {}
    inc_dir = os.path.join(TOP, "include", "agentbox")
    for n in sorted(os.listdir(inc_dir)):
        mod = n[:-2]
        homes = {HEADER_HOME[mod]} if mod in HEADER_HOME else sources.get(mod, set())
        if len(homes) != 1:
            print("layers: include/agentbox/%s: %s (name its folder in HEADER_HOME)" %
                  (n, "no %s.c" % mod if not homes else "%s.c in %s" %
                   (mod, ", ".join(sorted(homes)))))
            return 1
        public[mod] = homes.pop()
        files.append((os.path.join(inc_dir, n), public[mod]))
    bad, edges = [], set()
    for p, f in files:
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
        for m in INC.finditer(text):
            if m.group(1):  # "agentbox/NAME.h"
                g = public.get(m.group(2))
            else:           # a private header, beside the including file or relative to it
                q = os.path.normpath(os.path.join(os.path.dirname(p), m.group(2) + ".h"))
                g = folder_of(q) if q.startswith(os.path.join(TOP, "src") + os.sep) else None
            if g is None or g == f:
                continue
            edges.add((f, g))
            if rank[g] > rank[f]:
                bad.append("%s (%s) includes %s.h (%s)" % (os.path.relpath(p, TOP), f,
                                                           m.group(2), g))
    if "--objs" in sys.argv:
        objs = sys.argv[sys.argv.index("--objs") + 1]
        link_edges(objs, rank, edges, bad)
    if "--graph" in sys.argv:
        for a, b in sorted(edges, key=lambda e: (rank[e[0]], rank[e[1]])):
            print("%s -> %s" % (a, b))
    if bad:
        print("layers: %d use(s) climb the layers (%s, bottom first):" %
              (len(bad), " < ".join(LAYERS)))
        print("\n".join("  " + b for b in bad))
        return 1
    print("layers: %d folders, %d edges between them, none climbs" % (len(LAYERS), len(edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
