#!/usr/bin/env python3
"""Checks the documentation's links and the SPEC section map.

Every relative markdown link `[text](path#anchor)` in README.md,
BENCHMARKS.md, docs/**/*.md, packs/README.md and deploy/**/*.md must name
a file or directory that exists, and, when it has an `#anchor`, an anchor
of that file: an explicit `<a id="...">` (or `name="..."`) or the GitHub-style slug
of one of its headings. Every line of docs/sections.tsv (`§N.M<TAB>docs/
file.md#anchor`) must resolve the same way. Links inside fenced code blocks
and inline code are not links. Exits 1 listing what is broken, else 0.

The sources cite the reference by section as repository-relative links,
`[§11.1](docs/streaming.md#s11-1)`: every such citation in src/, tests/,
benches/, examples/, scripts/, config/, deploy/, packs/ and fuzz/ must
resolve, and name the file and anchor docs/sections.tsv gives its section
(or, for a section it does not list, its nearest listed parent).

With `--spec PATH` (the behaviour contract, kept outside the repository),
it also checks that every `§` heading of that file has its line in
docs/sections.tsv.

Standard library only:  python3 scripts/check-docs.py [--spec PATH]
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)*?\1")
# [text](target) or [text](target "title"); text may hold nested brackets
# one level deep (e.g. a link text with `[x]`).
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "packs" / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "deploy").rglob("*.md"))
    return [f for f in files if f.is_file()]


def prose_lines(text: str):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
                continue
            if mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
                continue
        if fence is None:
            yield n, line


def slug(heading: str) -> str:
    """GitHub's heading slug: markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)  # inline HTML such as <a id>
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN" or cat == "Mn":
            out.append("-" if ch == " " else ch)
    return "".join(out)


_anchor_cache: dict[Path, set[str]] = {}


def anchors(path: Path) -> set[str]:
    if path in _anchor_cache:
        return _anchor_cache[path]
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    for _, line in prose_lines(text):
        for m in EXPLICIT_ANCHOR.finditer(line):
            found.add(m.group(1))
        h = HEADING.match(line)
        if h:
            s = slug(h.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
    _anchor_cache[path] = found
    return found


def check_target(source: Path, target: str) -> str | None:
    """None when `target` (relative to `source`) resolves, else why not."""
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part)
    dest = source if path_part == "" else (source.parent / path_part).resolve()
    try:
        dest.relative_to(ROOT)
    except ValueError:
        return f"{target}: leaves the repository"
    if not dest.exists():
        return f"{target}: no such file"
    if anchor:
        if dest.is_dir():
            return f"{target}: an anchor on a directory"
        if dest.suffix.lower() != ".md":
            return None  # anchors into other files (line numbers) are not checked
        if unquote(anchor) not in anchors(dest):
            return f"{target}: no anchor `{anchor}` in {dest.relative_to(ROOT)}"
    return None


def check_links() -> list[str]:
    broken = []
    for f in markdown_files():
        text = f.read_text(encoding="utf-8")
        for n, line in prose_lines(text):
            line = INLINE_CODE.sub("", line)
            for m in LINK.finditer(line):
                target = m.group(1)
                if SCHEME.match(target) or target.startswith("//"):
                    continue
                why = check_target(f, target)
                if why:
                    broken.append(f"{f.relative_to(ROOT)}:{n}: {why}")
    return broken


def check_spec_coverage(spec: Path) -> list[str]:
    tsv = ROOT / "docs" / "sections.tsv"
    listed = set()
    if tsv.is_file():
        listed = {l.split("\t")[0] for l in tsv.read_text(encoding="utf-8").splitlines() if "\t" in l}
    missing = []
    for line in spec.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{2,6}\s+(§\d+(?:\.\d+)?)", line)
        if m and m.group(1) not in listed:
            missing.append(f"docs/sections.tsv: {m.group(1)} of {spec} is not listed")
    return missing


def check_sections() -> list[str]:
    tsv = ROOT / "docs" / "sections.tsv"
    if not tsv.is_file():
        return ["docs/sections.tsv: missing"]
    broken = []
    seen = set()
    for n, line in enumerate(tsv.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not re.fullmatch(r"§\d+(\.\d+)?", parts[0]):
            broken.append(f"docs/sections.tsv:{n}: not `§N.M<TAB>docs/file.md#anchor`: {line!r}")
            continue
        sec, target = parts
        if sec in seen:
            broken.append(f"docs/sections.tsv:{n}: {sec} listed twice")
        seen.add(sec)
        if "#" not in target:
            broken.append(f"docs/sections.tsv:{n}: {target}: no anchor")
            continue
        why = check_target(ROOT / "sections.tsv", target)  # paths are repository-relative
        if why:
            broken.append(f"docs/sections.tsv:{n}: {sec}: {why}")
    return broken


CITATION = re.compile(r"\[§(\d+(?:\.\d+)?)\]\(([^)\s]+)\)")
SOURCE_DIRS = ("src", "tests", "benches", "examples", "scripts", "config", "deploy", "packs", "fuzz")
SOURCE_SUFFIXES = {".rs", ".py", ".sh", ".yaml", ".yml", ".toml", ".json", ""}


def check_citations() -> list[str]:
    tsv = ROOT / "docs" / "sections.tsv"
    if not tsv.is_file():
        return []
    where = dict(l.split("\t") for l in tsv.read_text(encoding="utf-8").splitlines() if "\t" in l)
    broken = []
    for d in SOURCE_DIRS:
        for f in sorted((ROOT / d).rglob("*")):
            rel = f.relative_to(ROOT)
            if not f.is_file() or f.suffix not in SOURCE_SUFFIXES or rel.parts[:2] in (
                ("fuzz", "corpus"),
                ("fuzz", "regressions"),
            ) or "target" in rel.parts:
                continue
            try:
                text = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if "[§" not in text:
                continue
            for n, line in enumerate(text.splitlines(), 1):
                for m in CITATION.finditer(line):
                    sec, target = "§" + m.group(1), m.group(2)
                    want = sec
                    while want not in where and "." in want:
                        want = want.rsplit(".", 1)[0]
                    if where.get(want) != target:
                        broken.append(f"{rel}:{n}: {sec} links {target}, docs/sections.tsv says {where.get(want)}")
                        continue
                    why = check_target(ROOT / "x", target)
                    if why:
                        broken.append(f"{rel}:{n}: {why}")
    return broken


def main() -> int:
    args = sys.argv[1:]
    broken = check_links() + check_sections() + check_citations()
    if args[:1] == ["--spec"] and len(args) == 2:
        broken += check_spec_coverage(Path(args[1]))
    elif args:
        print("usage: check-docs.py [--spec PATH]", file=sys.stderr)
        return 2
    for b in broken:
        print(b)
    if broken:
        print(f"check-docs: {len(broken)} broken", file=sys.stderr)
        return 1
    print("check-docs: every link and section resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
