"""Rule 6 of scripts/check_layout.py: no file names a built-in method by string outside the
method registry (config/method_registry.{h,cc}) and worker/nn/.

A method's facts (its family, cap, ScaleNorm, rows and labels in the reports) live in the
registry; code elsewhere reads them from there (ParseMethod, SpecOf, MethodReads, RowMethodOf)
instead of comparing a method's name to a literal. Counted: the C++ files of the libraries,
programs and benchmarks (not tests/, whose sweep files and expectations spell ids), and the
Python scripts under scripts/, that hold a string literal equal to a method id (in double
quotes, or single quotes in Python), comments included (a comment quotes an id in backticks).
docs/, examples/ and reference data are not code.

The ids come from the registry's entries (`Method::kX, "id"`), or on a tree from before the
registry from the spellings of config/connection_options.cc (`{"id", Method::kX}`), so the rule
can be run on an old checkout with --root to count what it had.
"""
import os
import re

ALLOWED = ("config/method_registry.h", "config/method_registry.cc")
ALLOWED_DIRS = ("worker/nn/", "tests/", "docs/", "examples/", "reference/")


def method_ids(root):
    """The built-in method ids, sorted, read from the registry (or the old spelling table)."""
    ids = set()
    for path, pattern in (("config/method_registry.cc", r'Method::k\w+,\s*"([a-z0-9_]+)"'),
                          ("config/connection_options.cc", r'\{\s*"([a-z0-9_]+)",\s*Method::k\w+')):
        full = os.path.join(root, path)
        if os.path.exists(full):
            ids.update(re.findall(pattern, open(full, errors="replace").read()))
    return sorted(ids)


def python_scripts(root):
    folder = os.path.join(root, "scripts")
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join("scripts", name) for name in os.listdir(folder)
                  if name.endswith(".py"))


def counted(path):
    return path not in ALLOWED and not path.startswith(ALLOWED_DIRS)


def files_with_literals(root, cc_files, scripts, names, counted_path, skip_line=None):
    """{path: [(line, name), ...]} of each counted C++ file or script holding a string literal
    equal to one of `names` (double quotes, or single quotes in Python); lines that `skip_line`
    matches are passed over. Shared by rules 6 and 7."""
    if not names:
        return {}
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    cc = re.compile(r'"(' + alternatives + r')"')
    py = re.compile(r'(["\'])(' + alternatives + r')\1')
    found = {}
    candidates = [(p, cc, 1) for p in cc_files] + [(p, py, 2) for p in scripts]
    for path, pattern, group in candidates:
        if not counted_path(path):
            continue
        for number, line in enumerate(open(os.path.join(root, path), errors="replace"), 1):
            if skip_line is not None and skip_line.search(line):
                continue
            for match in pattern.finditer(line):
                found.setdefault(path, []).append((number, match.group(group)))
    return found


def files_naming_methods(root, cc_files):
    """{path: [(line, id), ...]} of each counted file that names a method id by string."""
    return files_with_literals(root, cc_files, python_scripts(root), method_ids(root), counted)


def check_method_names(root, cc_files):
    """(problems, summary line): one problem a place, and the count printed on every run."""
    found = files_naming_methods(root, cc_files)
    problems = []
    for path in sorted(found):
        for number, method in found[path]:
            problems.append(f'{path}:{number}: names method "{method}" by string; read it from '
                            f"the method registry (config/method_registry.h) instead")
    summary = (f"method names by string outside the registry and worker/nn: {len(found)} "
               f"file(s)")
    return problems, summary
