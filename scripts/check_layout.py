#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked on the source tree (no build needed).

  scripts/check_layout.py [--root DIR]           check; prints each violation, exits 1 if any
  scripts/check_layout.py --graph [--root DIR]   print the library graph as Markdown (the one in
                                                 docs/architecture.md, which --check compares)

Rules:
  1. Each library links only libraries of lower layers (LAYERS below), read from the
     target_link_libraries of every CMakeLists.txt.
  2. No library includes another library's internal headers (INTERNAL below); tests and
     benchmarks (white-box) may.
  3. Files have at most 400 lines; functions at most 60 lines, except a program's main().
  4. docs/architecture.md shows the graph as the CMake files define it.
"""
import argparse
import os
import re
import sys

# Layers, lowest first. A library may link libraries of lower layers only.
LAYERS = [
    ["base", "proto", "protocol"],
    ["config", "net"],
    ["domain", "nn"],
    ["sched", "store", "metrics", "train"],
    ["coordinator_core", "worker", "report", "eval"],
    ["server_rpc", "client"],
]
FOLDERS = {
    "base": "base", "proto": "proto", "protocol": "protocol", "config": "config", "net": "net",
    "domain": "server/domain", "nn": "worker/nn", "sched": "server/sched",
    "store": "server/store", "metrics": "server/metrics", "train": "worker/train",
    "coordinator_core": "server", "worker": "worker/daemon", "report": "client/report",
    "server_rpc": "server/rpc", "client": "client", "eval": "worker/eval",
}
# Headers that only their own folder (and its tests) may include.
INTERNAL = {
    "server/store/sqlite_db.h", "server/store/sqlite_rows.h", "server/store/write_queue.h",
    "server/store/migrations.h", "worker/train/run.h", "worker/train/communicator_backends.h",
    "worker/nn/sphere_row_math.h", "worker/nn/sphere_fused.h", "worker/nn/sphere_cuda.h",
    "worker/daemon/launch.h", "worker/daemon/batches.h", "worker/daemon/spool_file.h",
    "server/rpc/convert.h", "worker/eval/python_text_tables.h",
}
# Targets of other projects wrapped in a spheret:: name (cmake/Torch.cmake): no layer.
EXTERNAL = {"torch"}
SOURCE_DIRS = ["base", "config", "protocol", "net", "proto", "server", "worker", "client",
               "bench", "tests"]
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def source_files(root):
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d not in ("corpus", "gen")]
            for name in sorted(files):
                if name.endswith((".h", ".cc", ".cu")):
                    yield os.path.relpath(os.path.join(folder, name), root)


def link_graph(root):
    """{library: set(linked spheret libraries)} from every CMakeLists.txt."""
    graph = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("build", ".venv", ".git", "libfuzzer")]
        if "CMakeLists.txt" not in files or folder.startswith(os.path.join(root, "tests")):
            continue
        text = open(os.path.join(folder, "CMakeLists.txt")).read()
        for match in re.finditer(r"target_link_libraries\(\s*spheret_(\w+)(.*?)\)", text, re.S):
            name, body = match.group(1), match.group(2)
            if name == "warnings":
                continue
            deps = set(re.findall(r"spheret::(\w+)", body))
            deps |= {d for d in re.findall(r"\bspheret_(\w+)", body) if d != "warnings"}
            graph.setdefault(name, set()).update(deps)
    return graph


def layer_of(name):
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    return None


def check_links(graph):
    problems = []
    for name, deps in sorted(graph.items()):
        mine = layer_of(name)
        if mine is None:
            problems.append(f"library spheret_{name} has no layer in scripts/check_layout.py")
            continue
        for dep in sorted(deps - EXTERNAL):
            theirs = layer_of(dep)
            if theirs is None or theirs >= mine:
                problems.append(f"spheret_{name} (layer {mine}) links spheret_{dep} "
                                f"(layer {theirs}): links must point to lower layers")
    return problems


def check_includes(root, files):
    problems = []
    for path in files:
        if path.startswith(("tests/", "bench/")):
            continue  # white-box tests and benchmarks may
        folder = os.path.dirname(path)
        for number, line in enumerate(open(os.path.join(root, path), errors="replace"), 1):
            match = re.match(r'#include "([^"]+)"', line)
            if not match or match.group(1) not in INTERNAL:
                continue
            owner = os.path.dirname(match.group(1))
            if folder != owner and folder != os.path.join("tests", owner):
                problems.append(f"{path}:{number}: includes {match.group(1)}, internal to {owner}/")
    return problems


def strip_code(text):
    """The text with comments, string and character literals blanked (line breaks kept)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|'
                         r"'(?:\\.|[^'\\\n])*'", re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def long_functions(path, text):
    """(name, first line, lines) of each function body longer than MAX_FUNCTION_LINES."""
    code = strip_code(text)
    found, stack, start = [], [], 0
    for index, char in enumerate(code):
        if char in ";{}":
            head = code[start:index]
            start = index + 1
        if char == "{":
            outer = all(kind in ("namespace", "class") for kind, _, _ in stack)
            head_flat = " ".join(head.split())
            if re.search(r"\b(namespace)\b", head_flat) and "(" not in head_flat:
                kind = "namespace"
            elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head_flat):
                kind = "class"
            elif outer and re.search(r"\)\s*(const|override|noexcept|final|\s)*"
                                     r"(->\s*[\w:<>,*& ]+)?\s*$", head_flat) and \
                    not re.match(r"^(if|for|while|switch|catch|do)\b", head_flat.split("(")[0]
                                 .split()[-1] if head_flat.split("(")[0].split() else ""):
                kind = "function"
            else:
                kind = "block"
            name = head_flat.split("(")[0].split()[-1] if kind == "function" else ""
            first = code.count("\n", 0, index - len(head) + len(head) - len(head.lstrip())) + 1
            stack.append((kind, name, first))
        elif char == "}" and stack:
            kind, name, first = stack.pop()
            if kind == "function":
                last = code.count("\n", 0, index) + 1
                if last - first + 1 > MAX_FUNCTION_LINES and name != "main":
                    found.append((name, first, last - first + 1))
    return found


def check_sizes(root, files):
    problems = []
    for path in files:
        text = open(os.path.join(root, path), errors="replace").read()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_FILE_LINES})")
        for name, first, length in long_functions(path, text):
            problems.append(f"{path}:{first}: {name} has {length} lines "
                            f"(at most {MAX_FUNCTION_LINES} outside main)")
    return problems


def graph_markdown(graph):
    out = ["| layer | library (folder) | links |", "|---|---|---|"]
    for index in reversed(range(len(LAYERS))):
        for name in LAYERS[index]:
            deps = ", ".join(f"`{d}`" for d in sorted(graph.get(name, ()))) or "-"
            deps = deps.replace("`torch`", "LibTorch")
            out.append(f"| {index} | `spheret_{name}` (`{FOLDERS[name]}/`) | {deps} |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--graph", action="store_true", help="print the graph as Markdown")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    graph = link_graph(root)
    if args.graph:
        print(graph_markdown(graph))
        return 0
    files = list(source_files(root))
    problems = check_links(graph) + check_includes(root, files) + check_sizes(root, files)
    doc = os.path.join(root, "docs", "architecture.md")
    if graph_markdown(graph) not in open(doc).read():
        problems.append("docs/architecture.md: its graph differs from the CMake files' "
                        "(regenerate it with scripts/check_layout.py --graph)")
    for problem in problems:
        print(problem)
    print(f"layout: {len(files)} files, {len(graph)} libraries, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
