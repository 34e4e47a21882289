#!/usr/bin/env python3
"""docs-links.py - every pointer in the documentation leads somewhere.

README.md is a front door: most of what it used to say lives in docs/, one
topic a file, and the pages point at each other, at sluice(1) and at the
code. A pointer that leads nowhere is a page a reader cannot find, so this
fails on the first kind of drift it can see:

  - a relative markdown link ([text](path) or [text](path#anchor)) whose
    file, or whose anchor among the target's headings, does not exist;
  - a `docs/...` path, in the markdown files, in sluice(1) or in a comment
    of the code, that does not exist;
  - a section named after its file (docs/redis.md, "Partitions"; sluice(1),
    EXIT STATUS) that the file does not have (a heading or a bold lead that
    starts with those words);
  - anything that points outside the tree: a link that leaves it, or a
    name of the design notes that were never part of it (the list is
    OUTSIDE below).

Fenced code blocks are not read. Exit 0 when everything resolves, 1 with
one line per broken pointer.
"""
import glob
import os
import re
import sys

SRC = os.path.realpath(os.environ.get("SLUICE_SRCDIR") or
                       os.path.join(os.path.dirname(__file__), ".."))

OUTSIDE = re.compile(r"\.\./shared|\bDESIGN\.md\b|\bREDIS-NOTES\.md\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DOCS_PATH = re.compile(r"(?<![\w./-])docs/[\w.-]+(?:/[\w.-]+)*")
SECTION = re.compile(r"(?<![\w./-])((?:docs/)?[A-Za-z][\w-]*\.md),?\s+"
                     r"\(?\"([^\"]+)\"")
MAN_SECTION = re.compile(r"sluice\(1\),\s+([A-Z][A-Z]+(?: [A-Z]+)*)\b")
CODE_DOCS = re.compile(r"(?<![\w./-])docs/[\w-]+\.md")
CODE_GLOBS = ("include/sluice/*.h", "include/sluice/sys/*.h", "lib/*.[ch]",
              "lib/*/*.[ch]",
              "brokers/*.c", "brokers/*/*.[ch]", "brokers/*/*/*.[ch]",
              "serializers/*.[ch]", "testing/*.[ch]", "cli/*.[ch]",
              "tests/*.[ch]", "tests/*.sh", "tests/*/*.[ch]", "tests/*/*.sh",
              "examples/*/*.[ch]", "fuzz/*.[ch]", "bench/*.[ch]",
              "bench/*.sh", "*.am", "*/Makefile.inc", "configure.ac",
              "dev.sh", ".ci/run")

problems = []


def rel(path):
    return os.path.relpath(path, SRC)


def complain(where, what):
    problems.append("%s: %s" % (where, what))


def inside(path):
    real = os.path.realpath(path)
    return real == SRC or real.startswith(SRC + os.sep)


def without_fences(text):
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces made hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


_headings = {}


def headings(path):
    """(anchors, titles) of a markdown file: its headings' anchors, and
    the texts a section may be named by (headings and bold leads)."""
    if path not in _headings:
        anchors, titles, seen = set(), [], {}
        text = without_fences(open(path, encoding="utf-8").read())
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
            title = m.group(1)
            base = slug(title)
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else "%s-%d" % (base, n))
            titles.append(re.sub(r"[`*]", "", title))
        for m in re.finditer(r"\*\*([^*]+?)\*\*", text):
            titles.append(m.group(1).rstrip(".:"))
        _headings[path] = (anchors, titles)
    return _headings[path]


def has_section(path, title):
    want = " ".join(title.split()).lower().rstrip(".")
    for t in headings(path)[1]:
        if " ".join(t.split()).lower().startswith(want):
            return True
    return False


def man_sections():
    text = open(os.path.join(SRC, "cli", "sluice.1"), encoding="utf-8").read()
    return {m.group(1).strip('"').replace("\\-", "-")
            for m in re.finditer(r"^\.S[HS]\s+(.*)$", text, re.M)}


def check_section_refs(where, flat, base_dir):
    for m in SECTION.finditer(flat):
        name, title = m.group(1), m.group(2)
        if name.startswith("docs/") or os.sep not in name:
            candidates = [os.path.join(SRC, name), os.path.join(base_dir, name)]
        else:
            candidates = [os.path.join(base_dir, name)]
        target = next((c for c in candidates if os.path.isfile(c)), None)
        if target is None:
            complain(where, "%s (with \"%s\") does not exist" % (name, title))
        elif not has_section(target, title):
            complain(where, "%s has no section \"%s\"" % (name, title))
    sections = man_sections()
    for m in MAN_SECTION.finditer(flat):
        if m.group(1) not in sections:
            complain(where, "sluice(1) has no section %s" % m.group(1))


def check_docs_paths(where, text):
    for m in DOCS_PATH.finditer(text):
        path = m.group(0).rstrip(".,:;")
        if not os.path.exists(os.path.join(SRC, path)):
            complain(where, "%s does not exist" % path)


def check_markdown(path):
    where = rel(path)
    raw = open(path, encoding="utf-8").read()
    text = without_fences(raw)
    base = os.path.dirname(path)
    for m in OUTSIDE.finditer(raw):
        complain(where, "points outside the tree: %s" % m.group(0))
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        file_part, _, anchor = target.partition("#")
        dest = os.path.join(base, file_part) if file_part else path
        if not inside(dest):
            complain(where, "link leaves the tree: %s" % target)
        elif not os.path.exists(dest):
            complain(where, "link to a file that does not exist: %s" % target)
        elif anchor and dest.endswith(".md") and \
                anchor not in headings(dest)[0]:
            complain(where, "link to a missing section: %s" % target)
    check_docs_paths(where, text)
    check_section_refs(where, " ".join(text.split()), base)


def check_man(path):
    where = rel(path)
    raw = open(path, encoding="utf-8").read()
    text = re.sub(r"\\f[BIRP]", "", raw).replace("\\-", "-")
    for m in OUTSIDE.finditer(text):
        complain(where, "points outside the tree: %s" % m.group(0))
    check_docs_paths(where, text)
    check_section_refs(where, " ".join(text.split()), SRC)


def check_code(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    for m in CODE_DOCS.finditer(text):
        if not os.path.exists(os.path.join(SRC, m.group(0))):
            complain(rel(path), "%s does not exist" % m.group(0))


def main():
    pages = sorted(set(glob.glob(os.path.join(SRC, "*.md")) +
                       glob.glob(os.path.join(SRC, "docs", "*.md")) +
                       glob.glob(os.path.join(SRC, "clients", "*", "*.md")) +
                       glob.glob(os.path.join(SRC, "fuzz", "*.md"))))
    if os.path.join(SRC, "README.md") not in pages:
        print("docs-links: no README.md in %s" % SRC, file=sys.stderr)
        return 1
    for page in pages:
        check_markdown(page)
    check_man(os.path.join(SRC, "cli", "sluice.1"))
    for pattern in CODE_GLOBS:
        for path in sorted(glob.glob(os.path.join(SRC, pattern))):
            check_code(path)
    for p in problems:
        print("docs-links: " + p, file=sys.stderr)
    if problems:
        print("docs-links: %d broken pointers" % len(problems),
              file=sys.stderr)
        return 1
    print("docs-links: %d pages, sluice(1) and the code's comments: every "
          "pointer resolves" % len(pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
