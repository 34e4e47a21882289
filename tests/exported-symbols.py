#!/usr/bin/env python3
"""exported-symbols.py - the library exports its public API and nothing else.

Every function or variable a public header marks SLUICE_AVAILABLE_IN_x_y or
SLUICE_BROKER_API is the API; the library is built with
-fvisibility=hidden, so the markers are what exports. This compares the
two lists, both ways:

  - a symbol libsluice.so exports that no header declares is an internal
    function that leaked (a marker on a private declaration, or a file
    built without the hidden default): programs could link against it and
    break when it changes;
  - a declared symbol the library does not export is a promise a program
    meets only at link time ("undefined reference").

libsluice-conformance.so is read the same way for its own sluice_* symbols
(it carries Check inside it, whose symbols the kit's users call).
Exit 0 when the lists agree, 1 with one line per difference, 77 when the
libraries or nm are missing (unless CI is set).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

SRC = os.path.realpath(os.environ.get("SLUICE_SRCDIR") or
                       os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.realpath(os.environ.get("SLUICE_BUILDDIR") or os.getcwd())

MARKER = re.compile(r"\b(SLUICE_AVAILABLE_IN_\d+_\d+|SLUICE_BROKER_API)\b")
# The declaration after a marker runs to its first ';' (a prototype) or
# '{' (never, in a header, for an exported symbol).
NAME_BEFORE_PAREN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
NAME_OF_VARIABLE = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared(headers):
    names = set()
    for path in headers:
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        for match in MARKER.finditer(text):
            rest = text[match.end():]
            if rest.lstrip().startswith(("_SLUICE_EXPORT", "extern")) and \
                    "#define" in text[max(0, match.start() - 40):match.start()]:
                continue  # the macro's own definition
            decl = rest[:rest.find(";") + 1]
            if not decl:
                continue
            function = NAME_BEFORE_PAREN.search(decl)
            # A function pointer variable would match "(*name)"; the API has
            # none, so the first name before a parenthesis is the function.
            if function:
                names.add(function.group(1))
            else:
                variable = NAME_OF_VARIABLE.search(decl)
                if variable:
                    names.add(variable.group(1))
    return names


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library],
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVW":
            names.add(parts[2].split("@")[0])
    return names


def skip(why):
    print(f"exported-symbols: {why}")
    sys.exit(1 if os.environ.get("CI") else 77)


def main():
    if shutil.which("nm") is None:
        skip("no nm")
    lib = os.path.join(BUILD, ".libs", "libsluice.so")
    kit = os.path.join(BUILD, ".libs", "libsluice-conformance.so")
    if not os.path.exists(lib):
        skip(f"no {lib}: build first")
    headers = sorted(glob.glob(os.path.join(SRC, "include", "sluice", "*.h")) +
                     glob.glob(os.path.join(SRC, "include", "sluice", "sys",
                                            "*.h")))
    kit_header = os.path.join(SRC, "include", "sluice", "sluice-conformance.h")
    problems = []

    api = declared(h for h in headers if h != kit_header)
    have = exported(lib)
    for name in sorted(have - api):
        problems.append(f"libsluice.so exports {name}, which no public "
                        "header declares with an availability marker")
    for name in sorted(api - have):
        problems.append(f"a public header declares {name}, which "
                        "libsluice.so does not export")

    if os.path.exists(kit):
        kit_api = declared([kit_header])
        kit_have = {n for n in exported(kit) if n.startswith("sluice_")}
        for name in sorted(kit_have - kit_api):
            problems.append(f"libsluice-conformance.so exports {name}, "
                            "which sluice-conformance.h does not declare")
        for name in sorted(kit_api - kit_have):
            problems.append(f"sluice-conformance.h declares {name}, which "
                            "libsluice-conformance.so does not export")

    for line in problems:
        print(f"exported-symbols: {line}", file=sys.stderr)
    print(f"exported-symbols: libsluice.so exports {len(have)} symbols, "
          f"the headers declare {len(api)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
