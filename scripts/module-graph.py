#!/usr/bin/env python3
"""The library's module graph, from its sources: which module uses which.

    scripts/module-graph.py                 # edges, one per line: a -> b
    scripts/module-graph.py --under server  # only modules under crate::server
    scripts/module-graph.py --dot > g.dot   # Graphviz
    scripts/module-graph.py --check         # exit 1 if modules import in a circle

An edge `a -> b` means a file of module `a` names an item of module `b`
(`use crate::b::x`, `super::b::x` in code, …). A module's own submodules are
separate nodes; a parent that only declares a child (`mod b;`) has no edge
to it. `--check` allows one kind of circle, the module tree's own: a child
using its ancestors' items (`super::Evaluator`) while they re-export it.
Every other circle (siblings using each other, a handler table naming
handlers that import the table's helpers back) is an error. Paths are
resolved as far as they name module files; `std`, external crates and
`#[cfg(test)]` modules (tests.rs, `mod tests`) are left out. No third-party
dependency, so CI runs it with the system's python3.
"""

import argparse
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def modules():
    """Module path (tuple) -> its file, for every .rs file under src/."""
    mods = {}
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), SRC)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                path = () if rel == ["lib"] else ("<bin>",)
            elif rel[-1] == "mod":
                path = tuple(rel[:-1])
            else:
                path = tuple(rel)
            if path and path[-1] == "tests":
                continue
            mods[path] = os.path.join(root, f)
    return mods


def strip(text):
    """The text without comments, string literals and `#[cfg(test)] mod tests { … }`."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    m = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree.split(" as ")[0].strip()]
    prefix, inner = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for e in expand(p):
                out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def resolve(path, here, mods):
    """The module a path names (its longest module prefix), or None."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    elif here + (segs[0],) in mods:
        base = here
    else:
        return None
    best = base
    for s in segs:
        if base + (s,) in mods:
            base = base + (s,)
            best = base
        else:
            break
    return best


def graph():
    mods = modules()
    edges = set()
    for here, file in mods.items():
        if here == ("<bin>",):
            continue
        text = strip(open(file, encoding="utf-8").read())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += expand(m.group(1))
        paths += re.findall(r"\b(?:crate|super)(?:::\w+)+", text)
        paths += [m for m in re.findall(r"(?<![:\w])\w+(?:::\w+)+", text)
                  if here + (m.split("::")[0],) in mods]
        for p in paths:
            to = resolve(p, here, mods)
            if to is None or to == here or to == ():
                continue
            edges.add((here, to))
    return mods, edges


def name(m):
    return "::".join(m) if m else "crate"


def cycles(nodes, edges):
    """Strongly connected components of more than one module (Tarjan)."""
    succ = {n: [] for n in nodes}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(succ):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--under", help="only modules under this path (e.g. server)")
    ap.add_argument("--dot", action="store_true", help="Graphviz output")
    ap.add_argument("--check", action="store_true", help="exit 1 on import cycles")
    args = ap.parse_args()
    mods, edges = graph()
    if args.under:
        pre = tuple(args.under.split("::"))
        keep = lambda m: m[: len(pre)] == pre
        edges = {(a, b) for a, b in edges if keep(a) and keep(b)}
    if args.check:
        # A child may use its ancestors' items (`super::`) while they
        # declare and re-export it: that is the module tree, not a cycle.
        found = cycles(set(mods), {(a, b) for a, b in edges if a[: len(b)] != b})
        for c in found:
            print("import cycle: " + " <-> ".join(name(m) for m in c), file=sys.stderr)
        if found:
            sys.exit(1)
        print(f"no import cycles among {len(mods)} modules ({len(edges)} edges)")
        return
    if args.dot:
        print("digraph modules {\n  rankdir=LR;")
        for a, b in sorted(edges):
            print(f'  "{name(a)}" -> "{name(b)}";')
        print("}")
        return
    for a, b in sorted(edges):
        print(f"{name(a)} -> {name(b)}")


if __name__ == "__main__":
    main()
