#!/usr/bin/env bash
# Checks the library's layering from the real references between its files (CI runs it), and checks or,
# with --write, redraws the folder map in CONTRIBUTING.md. Needs python3. Usage: Scripts/check-layers.sh
# [--write]. Prints what is wrong and exits 1 on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PYTHON'
"""The rules, each from declarations and references found in Sources/YashimaShared (comments and string
literals left out; string interpolations kept):

1. No file outside the top-level facade refers to a type declared in a top-level file. The facade's class
   `YCache` is a namespace too: a file below it may open `extension YCache { ... }` to declare nested
   public types (Core's `YCache.Error`, `YCache.Options`, ...), and nothing else in it; a reference to
   `YCache.Error` is then a reference to Core's declaration, not to the facade.
2. No folder holds more than 15 Swift files directly.
3. Engine/ names no type of a remote backend (Remote/Redis/, Remote/HTTP/): the engine sees the remote
   tier only through Remote/'s protocols.
4. No cycle between top-level folders (a folder and its subfolders count as one; the facade is above all).
5. No stray edge (FORBIDDEN below): Coordination/ names nothing of Observation/ (the inotify layer both use
   is System/'s) or of Memory/ (the entry key flights share with the tiers is Key/'s); Remote/ names
   nothing of Storage/ or Engine/ (the machine's board is its only way across); System/ and Support/ name
   no other folder.
6. The folder map in CONTRIBUTING.md (between its `folder-map` markers) is the one these references draw.
7. The command line (Sources/yashima): each file of Commands/ names no type declared in another file of
   Commands/ (what two commands share lives outside it), and no file outside Commands/ names a type of
   Commands/ but Entry.swift, whose `commands` list is the dispatch.

A reference is a name (or a dotted chain of names) that resolves to a type, extension-less typealias or
protocol declared in a file of another folder; private and fileprivate declarations are not visible
outside their file and are left out. A nested type counts only by its qualified name (`Policy.Observation`)."""

import os
import re
import sys

ROOT = "Sources/YashimaShared"
DOC = "CONTRIBUTING.md"
BEGIN, END = "<!-- folder-map:begin (Scripts/check-layers.sh --write) -->", "<!-- folder-map:end -->"
MAX_FILES = 15
# (folder, folder it must not name, why); a folder stands for its subfolders too, "*" for every other one.
FORBIDDEN = [
    ("Coordination", "Observation", "the inotify wrappers Coordination uses are System/'s"),
    ("Coordination", "Memory", "the entry key flights use is Key/'s; the memory store is the engine's"),
    ("Remote", "Storage", "Remote/ reaches the machine only through RemoteMachineBoard"),
    ("Remote", "Engine", "the engine sees Remote/, never the reverse"),
    ("System", "*", "System/ is the bottom layer"),
    ("Support", "*", "Support/ is the bottom layer"),
]
FACADE = "(facade)"
DECLARING = {"class", "struct", "enum", "protocol", "actor", "extension", "typealias"}


def code_only(text):
    """The source with comments and string literal contents removed (interpolations kept)."""
    out, i, n = [], 0, len(text)

    def skip_string(i):
        # i at the opening quote(s); returns the index after the closing ones, appending interpolations.
        hashes = 0
        while text[i] == "#":
            hashes += 1
            i += 1
        multi = text.startswith('"""', i)
        quote = '"""' if multi else '"'
        i += len(quote)
        close = quote + "#" * hashes
        escape = "\\" + "#" * hashes
        while i < n:
            if text.startswith(close, i):
                return i + len(close)
            if text.startswith(escape + "(", i):
                i += len(escape) + 1
                depth, start = 1, i
                while i < n and depth:
                    if text[i] == "(":
                        depth += 1
                    elif text[i] == ")":
                        depth -= 1
                    elif text[i] == '"':
                        out.append(" " + code_only(text[start:i]) + " ")
                        i = skip_string(i)
                        start = i
                        continue
                    i += 1
                out.append(" " + code_only(text[start:i - 1]) + " ")
                continue
            if text.startswith(escape, i):
                i += len(escape) + 1
                continue
            i += 1
        return i

    while i < n:
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif text[i] == '"' or (text[i] == "#" and re.match(r'#+"', text[i:])):
            out.append('""')
            i = skip_string(i)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[{}]|\S")


def scan(path):
    """(declarations, references, facade members) of one file. Declarations: (qualified name, private).
    References: dotted chains. Facade members: lines of `extension YCache` bodies that declare no type."""
    text = code_only(open(path, encoding="utf-8").read())
    tokens = TOKEN.findall(text)
    declarations, references, members = [], [], []
    scopes = []  # (qualified name or None, is `extension YCache`)
    pending = None  # (qualified name, is YCache extension) waiting for its `{`
    previous = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "{":
            scopes.append(pending if pending else (None, False))
            pending = None
        elif token == "}":
            if scopes:
                scopes.pop()
        elif token in DECLARING and index + 1 < len(tokens) and re.match(r"[A-Za-z_]", tokens[index + 1]):
            name = tokens[index + 1]
            outer = next((scope[0] for scope in reversed(scopes) if scope[0]), None)
            private = any(word in ("private", "fileprivate") for word in previous[-4:])
            if token == "extension":
                pending = (name, name == "YCache")
                if name != "YCache" or any(scope[0] for scope in scopes):
                    references.append(name)
            else:
                qualified = f"{outer}.{name}" if outer and "." not in name else name
                declarations.append((qualified, private))
                if token != "typealias":
                    pending = (qualified, False)
            index += 2
            previous = [token, name]
            continue
        elif re.match(r"[A-Za-z_]", token):
            inside_facade = scopes and scopes[-1][1] and len([s for s in scopes if s[0]]) == 1
            if inside_facade and token in ("func", "var", "let", "init", "subscript", "case"):
                members.append(token)
            references.append(token)
        previous.append(token)
        index += 1
    return declarations, references, members


def folder_of(relative):
    folder = os.path.dirname(relative)
    return folder if folder else FACADE


files = {}
for directory, _, names in os.walk(ROOT):
    for name in sorted(names):
        if name.endswith(".swift"):
            path = os.path.join(directory, name)
            files[os.path.relpath(path, ROOT)] = scan(path)

declared = {}  # qualified name -> set of files
for relative, (declarations, _, _) in files.items():
    for qualified, private in declarations:
        if not private:
            declared.setdefault(qualified, set()).add(relative)

problems = []
edges = {}
for relative, (declarations, references, members) in sorted(files.items()):
    folder = folder_of(relative)
    own = {qualified for qualified, _ in declarations}
    edges.setdefault(folder, set())
    if members and folder != FACADE:
        problems.append(f"{relative}: `extension YCache` adds members ({', '.join(sorted(set(members)))}); "
                        "below the facade it may only declare nested types")
    for chain in references:
        parts = chain.split(".")
        target = None
        for length in range(len(parts), 0, -1):
            name = ".".join(parts[:length])
            if name in own:
                break
            if name in declared:
                target = name
                break
        if not target:
            continue
        for other in declared[target]:
            other_folder = folder_of(other)
            if other_folder == folder:
                continue
            edges[folder].add(other_folder)
            if other_folder == FACADE:
                problems.append(f"{relative}: refers to {target}, declared in the facade ({other})")
            if folder == "Engine" and re.match(r"Remote/(Redis|HTTP)", other_folder):
                problems.append(f"{relative}: names {target} of a remote backend ({other})")

for folder, targets in sorted(edges.items()):
    for source, target, why in FORBIDDEN:
        if folder.split("/")[0] != source:
            continue
        for other in sorted(targets):
            if other.split("/")[0] != source and (target == "*" or other.split("/")[0] == target):
                problems.append(f"{folder} refers to {other}: a stray edge ({why})")

top = {}
for folder, targets in edges.items():
    if folder != FACADE:
        top.setdefault(folder.split("/")[0], set()).update(t.split("/")[0] for t in targets)
for folder in top:
    top[folder].discard(folder)


def cycle_from(start):
    """A path start → ... → start in `top`, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for target in sorted(top.get(node, ())):
            if target == start:
                return path + [start]
            if target not in seen and target != FACADE:
                seen.add(target)
                stack.append((target, path + [target]))
    return None


reported = set()
for folder in sorted(top):
    cycle = cycle_from(folder)
    if cycle and frozenset(cycle) not in reported:
        reported.add(frozenset(cycle))
        problems.append("folder cycle: " + " → ".join(cycle))

CLI, COMMANDS, CLI_ENTRY = "Sources/yashima", "Commands", "Entry.swift"
cli = {}
for directory, _, names in os.walk(CLI):
    for name in sorted(names):
        if name.endswith(".swift"):
            path = os.path.join(directory, name)
            cli[os.path.relpath(path, CLI)] = scan(path)
cli_declared = {}
for relative, (declarations, _, _) in cli.items():
    for qualified, private in declarations:
        if not private:
            cli_declared.setdefault(qualified, set()).add(relative)
for relative, (declarations, references, _) in sorted(cli.items()):
    own = {qualified for qualified, _ in declarations}
    in_commands = os.path.dirname(relative) == COMMANDS
    for chain in references:
        parts = chain.split(".")
        for length in range(len(parts), 0, -1):
            name = ".".join(parts[:length])
            if name in own:
                break
            if name in cli_declared:
                for other in sorted(cli_declared[name]):
                    if other == relative or os.path.dirname(other) != COMMANDS:
                        continue
                    if in_commands:
                        problems.append(f"{CLI}/{relative}: names {name} of another command ({other})")
                    elif relative != CLI_ENTRY:
                        problems.append(f"{CLI}/{relative}: names {name} of a command ({other}); only "
                                        f"{CLI_ENTRY} lists the commands")
                break

counts = {}
for relative in files:
    counts[os.path.dirname(relative) or "."] = counts.get(os.path.dirname(relative) or ".", 0) + 1
for folder, count in sorted(counts.items()):
    if count > MAX_FILES:
        problems.append(f"{ROOT}/{folder}: {count} Swift files directly (at most {MAX_FILES})")

width = max(len(folder) for folder in edges)
lines = ["```", f"{'folder':<{width}}  refers to (by the types its files name)"]
for folder in sorted(edges, key=lambda f: (f != FACADE, f)):
    targets = sorted(edges[folder], key=lambda f: (f != FACADE, f))
    lines.append(f"{folder:<{width}}  {', '.join(targets) if targets else '—'}")
lines.append("```")
block = "\n".join(lines)

document = open(DOC, encoding="utf-8").read()
if BEGIN not in document or END not in document:
    problems.append(f"{DOC}: no folder map between the markers {BEGIN} and {END}")
else:
    start = document.index(BEGIN) + len(BEGIN)
    current = document[start:document.index(END)].strip("\n")
    if current != block:
        if "--write" in sys.argv[1:]:
            document = document[:start] + "\n" + block + "\n" + document[document.index(END):]
            open(DOC, "w", encoding="utf-8").write(document)
            print(f"{DOC}: folder map redrawn")
        else:
            problems.append(f"{DOC}: the folder map is out of date (run Scripts/check-layers.sh --write):\n{block}")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"layers: {len(files)} files in {len(edges)} folders; nothing below the facade names it; no folder cycle; "
      "no stray edge; folder map current; each command its own")
PYTHON
