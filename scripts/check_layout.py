#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked on the source tree (no build needed).

  scripts/check_layout.py [--root DIR]           check; prints each violation, exits 1 if any
  scripts/check_layout.py --links [--root DIR]   check the CMake files' link rules (1 and 5) only
  scripts/check_layout.py --graph [--root DIR]   print the library graph as Markdown (the one in
                                                 docs/architecture.md, which --check compares)
  scripts/check_layout.py --internal [--root DIR]  print the internal headers (INTERNAL) as Markdown

Rules:
  1. Each library links only libraries of lower layers (LAYERS below), read from the
     target_link_libraries of every CMakeLists.txt.
  2. INTERNAL lists exactly the headers that no other folder includes (tests and benchmarks,
     white-box, may and do not count): a header included from another folder is not internal, and
     one that only its own folder includes must be listed.
  3. Files have fewer than 380 lines; functions at most 50 lines, except a program's main().
  4. docs/architecture.md shows the graph as the CMake files define it.
  5. No target (library, program, test or fuzzer) links both LibTorch and gRPC, directly or
     through what it links (scripts/layout_cmake.py).
  6. No file names a built-in method by string outside the method registry and worker/nn
     (scripts/layout_methods.py); every run prints how many do.
  7. No file spells a metric name, a diag field name or a trial state outside the metric catalog
     and the protocol (scripts/layout_catalog.py); every run prints how many do.
  8. A trial's config text is parsed once where it enters a process (scripts/layout_catalog.py
     ENTRY); every run prints the sites.
  9. No file calls at::parallel_for or at::parallel_reduce but worker/nn/parallel.cc: in a file
     built without -fopenmp they run on the calling thread only (worker/nn/parallel.h).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout_cmake  # noqa: E402
import layout_catalog  # noqa: E402
import layout_methods  # noqa: E402

# Layers, lowest first. A library may link libraries of lower layers only.
LAYERS = [
    ["base", "proto", "protocol"],
    ["config", "net", "text"],
    ["domain", "nn"],
    ["sched", "store", "sweep", "metrics", "train"],
    ["coordinator_core", "worker", "report", "eval"],
    ["server_rpc", "render"],
    ["client"],
]
FOLDERS = {
    "base": "base", "proto": "proto", "protocol": "protocol", "config": "config", "net": "net",
    "domain": "server/domain", "nn": "worker/nn", "sched": "server/sched",
    "store": "server/store", "metrics": "server/metrics", "train": "worker/train",
    "sweep": "server/sweep",
    "coordinator_core": "server", "worker": "worker/daemon", "report": "client/report",
    "server_rpc": "server/rpc", "client": "client", "eval": "worker/eval",
    "render": "client/render",
    "text": "worker/text",
}
# Headers that no other folder includes (its tests and benchmarks aside): only their own
# folder may, and every such header is listed (rule 2). One a line, sorted.
INTERNAL = {
    "client/commands.h",
    "client/connection.h",
    "client/fetch.h",
    "client/geometry_report.h",
    "client/proto_text.h",
    "client/report/claims_rows.h",
    "client/report/confounds.h",
    "client/report/fisher.h",
    "client/report/paper_columns.h",
    "client/report/stats.h",
    "client/run_bounded.h",
    "client/sql_printf.h",
    "config/train_config_checks.h",
    "server/coordinator_state.h",
    "server/coordinator_types.h",
    "server/curve_downsample.h",
    "server/decisions.h",
    "server/evaluations.h",
    "server/event_intake.h",
    "server/lease_keeper.h",
    "server/live_trials.h",
    "server/metrics/trial_series.h",
    "server/reads.h",
    "server/rpc/auth.h",
    "server/rpc/convert.h",
    "server/rpc/services.h",
    "server/searches.h",
    "server/store/migrations.h",
    "server/store/packed_points.h",
    "server/store/sqlite_db.h",
    "server/store/sqlite_rows.h",
    "server/store/write_queue.h",
    "server/submissions.h",
    "server/sweep/sweep_scan.h",
    "server/sweep/sweep_search.h",
    "server/sweep/sweep_yaml.h",
    "server/sweep_watch.h",
    "server/trial_configs.h",
    "worker/daemon/batches.h",
    "worker/daemon/launch.h",
    "worker/daemon/private_files.h",
    "worker/daemon/rpc_error_log.h",
    "worker/daemon/spool.h",
    "worker/daemon/spool_file.h",
    "worker/daemon/trainer_process.h",
    "worker/daemon/trainer_records.h",
    "worker/daemon/worker.h",
    "worker/daemon/worker_metrics.h",
    "worker/daemon/worker_options.h",
    "worker/eval/metrics.h",
    "worker/eval/scorer.h",
    "worker/eval/tasks.h",
    "worker/lm_check_data.h",
    "worker/lm_export.h",
    "worker/lm_fail.h",
    "worker/lm_prepare.h",
    "worker/lm_train.h",
    "worker/lm_zero_shot.h",
    "worker/nn/connection.h",
    "worker/nn/euclidean_connections.h",
    "worker/nn/jacobian.h",
    "worker/nn/attention_fused.h",
    "worker/nn/attention_rows.h",
    "worker/nn/attention_rows_avx512.h",
    "worker/nn/attention_tiles.h",
    "worker/nn/gelu_fused.h",
    "worker/nn/layer_norm_rows.h",
    "worker/nn/ngpt.h",
    "worker/nn/norm_fused.h",
    "worker/nn/norms.h",
    "worker/nn/parallel.h",
    "worker/nn/rope.h",
    "worker/nn/row_sums.h",
    "worker/nn/scripted_connection.h",
    "worker/nn/sphere_connection.h",
    "worker/nn/sphere_cuda.h",
    "worker/nn/sphere_cuda_kernels.h",
    "worker/nn/sphere_fused.h",
    "worker/nn/sphere_row_math.h",
    "worker/nn/sphere_rows.h",
    "worker/nn/sphere_update.h",
    "worker/text/gpt2_pieces.h",
    "worker/text/json_field.h",
    "worker/text/parquet_pages.h",
    "worker/text/parquet_values.h",
    "worker/text/pickle.h",
    "worker/text/prepare_publish.h",
    "worker/text/preparer.h",
    "worker/text/unicode_classes.h",
    "worker/text/unicode_tables.h",
    "worker/train/checkpoint.h",
    "worker/train/checkpointer.h",
    "worker/train/communicator_backends.h",
    "worker/train/diagnostics.h",
    "worker/train/evaluator.h",
    "worker/train/event_history.h",
    "worker/train/gate_schedule.h",
    "worker/train/huge_pages.h",
    "worker/train/optimizer.h",
    "worker/train/run.h",
    "worker/train/safetensors.h",
    "worker/train/schedule.h",
    "worker/train/shard_pool.h",
    "worker/train/sharded_model.h",
    "worker/train/side_seed.h",
    "worker/train/step_log.h",
    "worker/train/train_data.h",
    "worker/train/train_step.h",
}
# Targets of other projects wrapped in a spheret:: name (cmake/Torch.cmake, cmake/Arrow.cmake):
# no layer.
EXTERNAL = {"torch", "arrow"}
SOURCE_DIRS = ["base", "config", "protocol", "net", "proto", "server", "worker", "client",
               "bench", "tests"]
MAX_FILE_LINES = 379
# Rules 7 and 8 fail the check (before the re-cut of issue 48 they only counted).
STRICT_CATALOG = True
MAX_FUNCTION_LINES = 50


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


def includes_from_outside(root, files):
    """{header: ["path:line", ...]} for each include of a header from another folder (tests and
    benchmarks aside)."""
    found = {}
    for path in files:
        if path.startswith(("tests/", "bench/")):
            continue  # white-box tests and benchmarks may
        for number, line in enumerate(open(os.path.join(root, path), errors="replace"), 1):
            match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if match and os.path.dirname(match.group(1)) != os.path.dirname(path):
                found.setdefault(match.group(1), []).append(f"{path}:{number}")
    return found


def internal_headers(root, files):
    """The headers of the libraries (not tests or benchmarks) that no other folder includes."""
    outside = includes_from_outside(root, files)
    return sorted(path for path in files if path.endswith(".h") and path not in outside and
                  not path.startswith(("tests/", "bench/")))


def check_includes(root, files):
    problems = []
    outside = includes_from_outside(root, files)
    for header in sorted(INTERNAL):
        if header not in files:
            problems.append(f"{header}: listed in INTERNAL (scripts/check_layout.py) but no such "
                            f"header: remove it from INTERNAL")
        for where in outside.get(header, []):
            problems.append(f"{where}: includes {header}, internal to "
                            f"{os.path.dirname(header)}/")
    for header in internal_headers(root, files):
        if header not in INTERNAL:
            problems.append(f"{header}: no other folder includes it, but INTERNAL "
                            f"(scripts/check_layout.py) does not list it: add it")
    return problems


def internal_markdown(root, files):
    by_folder = {}
    for header in internal_headers(root, files):
        by_folder.setdefault(os.path.dirname(header), []).append(os.path.basename(header))
    out = ["| folder | internal headers (only this folder includes them) |", "|---|---|"]
    for folder in sorted(by_folder):
        out.append(f"| `{folder}/` | " + ", ".join(f"`{h}`" for h in by_folder[folder]) + " |")
    return "\n".join(out)


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


def check_parallel_for(root, files):
    """Rule 9: LibTorch's parallel loops only where OpenMP compiles them (parallel.cc)."""
    problems = []
    for path in files:
        if path == "worker/nn/parallel.cc":
            continue
        text = strip_code(open(os.path.join(root, path), errors="replace").read())
        for match in re.finditer(r"\bat::parallel_(for|reduce)\b", text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path}:{line}: {match.group(0)} runs on one thread in a file built "
                            f"without OpenMP; call spheret::nn::ParallelFor (worker/nn/parallel.h)")
    return problems


def graph_markdown(graph):
    out = ["| layer | library (folder) | links |", "|---|---|---|"]
    for index in reversed(range(len(LAYERS))):
        for name in LAYERS[index]:
            deps = ", ".join(f"`{d}`" for d in sorted(graph.get(name, ()))) or "-"
            deps = deps.replace("`torch`", "LibTorch")
            deps = deps.replace("`arrow`", "Arrow (when found)")
            out.append(f"| {index} | `spheret_{name}` (`{FOLDERS[name]}/`) | {deps} |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--graph", action="store_true", help="print the graph as Markdown")
    parser.add_argument("--internal", action="store_true",
                        help="print the internal headers as Markdown")
    parser.add_argument("--links", action="store_true",
                        help="check only the CMake files' link rules (layers; LibTorch and "
                             "gRPC apart)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    graph = link_graph(root)
    if args.graph:
        print(graph_markdown(graph))
        return 0
    files = [] if args.links else list(source_files(root))
    if args.internal:
        print(internal_markdown(root, files))
        return 0
    torch_grpc, targets = layout_cmake.check_torch_grpc(root)
    problems = check_links(graph) + torch_grpc
    if not args.links:
        problems += check_includes(root, files) + check_sizes(root, files)
        problems += check_parallel_for(root, files)
        doc = os.path.join(root, "docs", "architecture.md")
        if graph_markdown(graph) not in open(doc).read():
            problems.append("docs/architecture.md: its graph differs from the CMake files' "
                            "(regenerate it with scripts/check_layout.py --graph)")
        named, methods_summary = layout_methods.check_method_names(root, files)
        problems += named
        spelled, catalog_summary = layout_catalog.check_catalog_names(root, files, STRICT_CATALOG)
        problems += spelled
    for problem in problems:
        print(problem)
    if not args.links:
        print(methods_summary)
        for line in catalog_summary:
            print(line)
    print(f"layout: {len(files)} files, {len(graph)} libraries, {len(targets.defined)} targets, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
