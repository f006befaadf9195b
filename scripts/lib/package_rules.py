"""The rules of scripts/check-architecture that need Package.swift (run from it; prints violations, exits 1):

  5. docs/architecture.md's table of targets names every non-test target of Package.swift, no other, and
     its "may use" column lists exactly that target's declared dependencies (a product by its product
     name; "—" for none; text in parentheses is commentary and ignored);
  6. a Swift file imports a module of this package (a target, or a product a target depends on) only
     when its own target declares it: SwiftPM builds an undeclared import of a module that happens to
     be built first, until it does not.

Package.swift is read as text, not evaluated: each `.target(`, `.executableTarget(`, `.testTarget(`
and `.systemLibrary(` call with its `name:`, `dependencies:` and `path:`. A call this reader cannot
follow is itself reported, so that a new manifest style fails loudly rather than passing unchecked.
Usage: package_rules.py ROOT
"""

import os
import re
import sys

KINDS = ("target", "executableTarget", "testTarget", "systemLibrary")


def calls(text, name):
    """Yields the argument text of every `.name(` call, parentheses balanced (strings skipped)."""
    for m in re.finditer(r"\.%s\s*\(" % name, text):
        depth, i, in_str = 1, m.end(), False
        while i < len(text) and depth:
            ch = text[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            i += 1
        yield text[m.end():i - 1]


def bracketed(args, label):
    """The text inside `label: [ ... ]`, or None when the label is absent."""
    m = re.search(r"\b%s\s*:\s*\[" % label, args)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(args) and depth:
        depth += {"[": 1, "]": -1}.get(args[i], 0)
        i += 1
    return args[m.end():i - 1]


def read_manifest(root, problems):
    text = open(os.path.join(root, "Package.swift")).read()
    text = re.sub(r"//[^\n]*", "", text)
    targets = {}
    for kind in KINDS:
        for args in calls(text, kind):
            name = re.match(r'\s*name\s*:\s*"([^"]+)"', args)
            if not name:
                problems.append(f"Package.swift: a .{kind}( call whose first argument is not name: \"…\" (the checks cannot read it)")
                continue
            deps_text = bracketed(args, "dependencies") or ""
            deps = []
            for d in re.finditer(r'\.product\s*\(\s*name\s*:\s*"([^"]+)"[^)]*\)|\.target\s*\(\s*name\s*:\s*"([^"]+)"\s*\)|\.byName\s*\(\s*name\s*:\s*"([^"]+)"\s*\)|"([^"]+)"', deps_text):
                deps.append(next(g for g in d.groups() if g))
            leftover = re.sub(r'\.(product|target|byName)\s*\([^)]*\)|"[^"]*"|[\s,]', "", deps_text)
            if leftover:
                problems.append(f"Package.swift: target {name.group(1)} has dependencies the checks cannot read: {leftover}")
            path = re.search(r'\bpath\s*:\s*"([^"]+)"', args)
            default = ("Tests/" if kind == "testTarget" else "Sources/") + name.group(1)
            targets[name.group(1)] = {"kind": kind, "deps": deps, "path": path.group(1) if path else default}
    return targets


def read_doc_table(root):
    """{target: [may use]} from the table under "## Targets" in docs/architecture.md, with line numbers."""
    rows = {}
    lines = open(os.path.join(root, "docs/architecture.md")).read().split("\n")
    in_section = False
    for n, line in enumerate(lines, 1):
        if line.startswith("## "):
            in_section = line.startswith("## Targets")
            continue
        if not in_section or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= set("-: ") or cells[0] == "target":
            continue
        name = cells[0].strip("`")
        may = re.sub(r"\([^)]*\)", "", cells[-1])
        uses = [u.strip().strip("`") for u in may.split(",") if u.strip().strip("`")]
        rows[name] = ([] if uses == ["—"] else uses, n)
    return rows


def module_name(target):
    return re.sub(r"[^A-Za-z0-9_]", "_", target)


def main():
    root = sys.argv[1]
    missing = [f for f in ("Package.swift", "docs/architecture.md") if not os.path.isfile(os.path.join(root, f))]
    if missing:
        print(f"{' and '.join(missing)} not found under {os.path.abspath(root)}: the rules on targets and imports need them")
        return 1
    problems = []
    targets = read_manifest(root, problems)
    rows = read_doc_table(root)

    # 5. The doc's table against the manifest.
    for name, t in targets.items():
        if t["kind"] == "testTarget":
            continue
        if name not in rows:
            problems.append(f"docs/architecture.md: the table of targets has no row for target {name} (Package.swift declares it)")
            continue
        uses, line = rows[name]
        if sorted(uses) != sorted(t["deps"]):
            problems.append(
                f"docs/architecture.md:{line}: the may-use column of {name} says {', '.join(sorted(uses)) or '—'}; "
                f"Package.swift declares {', '.join(sorted(t['deps'])) or '—'}")
    for name, (_, line) in rows.items():
        if name not in targets or targets[name]["kind"] == "testTarget":
            problems.append(f"docs/architecture.md:{line}: the table of targets names {name}, which Package.swift does not declare")

    # 6. Imports of this package's modules only where declared.
    ours = {module_name(n): n for n in targets}
    for t in targets.values():
        for d in t["deps"]:
            ours.setdefault(module_name(d), d)
    for name, t in sorted(targets.items()):
        directory = os.path.join(root, t["path"])
        if t["kind"] == "systemLibrary" or not os.path.isdir(directory):
            continue
        allowed = {module_name(d) for d in t["deps"]} | {module_name(name)}
        for base, _, files in sorted(os.walk(directory)):
            for f in sorted(files):
                if not f.endswith(".swift"):
                    continue
                path = os.path.join(base, f)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = re.match(r"\s*(?:@\w+(?:\([^)]*\))?\s+|(?:public|package|internal|fileprivate|private|open)\s+)*"
                                 r"import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?(\w+)", line)
                    if m and m.group(1) in ours and m.group(1) not in allowed:
                        rel = os.path.relpath(path, root)
                        problems.append(f"import of a module its target does not declare: {rel}:{n} imports {m.group(1)}; "
                                        f"add it to target {name}'s dependencies in Package.swift")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
