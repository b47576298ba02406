#!/usr/bin/env python3
"""Every relative link in README.md, BENCHMARKS.md, docs/ and benchmarks/results/ resolves: the
file or folder exists in the tree, and a `#anchor` into a markdown file names one of its
headings (GitHub's slugs). Web links are not fetched (CI has no network to spend on them).

    python3 scripts/ci/check_links.py          # from anywhere; exit 1 with the broken links listed
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def documents():
    yield ROOT / "README.md"
    yield ROOT / "BENCHMARKS.md"
    yield from sorted((ROOT / "docs").glob("**/*.md"))
    yield from sorted((ROOT / "benchmarks" / "results").glob("**/README.md"))


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[`*_]", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: pathlib.Path) -> set:
    found, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def broken_links():
    bad = []
    for doc in documents():
        if not doc.exists():
            bad.append(f"{doc.relative_to(ROOT)}: missing")
            continue
        text, fence_free = doc.read_text(), []
        fence = False
        for line in text.splitlines():
            if line.startswith("```"):
                fence = not fence
            elif not fence:
                fence_free.append(line)
        for m in LINK.finditer("\n".join(fence_free)):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(ROOT)}: {target}"
            if not dest.exists():
                bad.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where} (no heading #{anchor})")
    return bad


def main():
    bad = broken_links()
    for b in bad:
        print(b)
    count = sum(1 for _ in documents())
    print(f"{count} documents checked, {len(bad)} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
