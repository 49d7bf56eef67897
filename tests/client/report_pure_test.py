#!/usr/bin/env python3
"""The report library's core stays pure (issue 48): no file under client/report/ writes a file or
starts a process. Writing the reports' texts and figures and running gnuplot belong to
client/render/ (spheret_render). Fails naming each line that creeps back.

Usage: report_pure_test.py SOURCE_DIR
"""
import os
import re
import sys

# What a pure library has no business calling: file streams and C stdio files, processes, and the
# filesystem calls that change the disk (std::filesystem or its usual alias fs::).
FORBIDDEN = re.compile(
    r"\b(?:std::)?[io]?fstream\b|\bfopen\s*\(|\bfreopen\s*\(|\bpopen\s*\(|\bfork\s*\(|"
    r"\bexec[lv]p?e?\s*\(|\bposix_spawnp?\s*\(|\bsystem\s*\(|<fstream>|<unistd\.h>|<sys/wait\.h>|"
    r"\b(?:std::filesystem|fs)::(?:create_directory|create_directories|create_symlink|"
    r"create_hard_link|remove|remove_all|rename|copy|copy_file|resize_file|permissions)\b")


def violations(text):
    """[(line number, line)] of the forbidden calls in a C++ text (comments aside)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0]
        if FORBIDDEN.search(code):
            found.append((number, line.strip()))
    return found


def self_check():
    """The rule catches what it is for, and lets pure code be."""
    for bad in ('std::ofstream out(path);', 'FILE* f = fopen("x", "w");',
                'execlp(gnuplot.c_str(), nullptr);', 'const pid_t pid = fork();',
                'fs::create_directories(dir, error);', 'std::filesystem::remove(path);',
                '#include <fstream>'):
        assert violations(bad), bad
    for good in ('std::filesystem::path(dataset).filename()', 'out.parent_path() / "x.gp"',
                 '// runs gnuplot: fork() and execlp() live in client/render', 'Format format;'):
        assert not violations(good), good


def main():
    self_check()
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    folder = os.path.join(root, "client", "report")
    problems = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".cc", ".h")):
            continue
        text = open(os.path.join(folder, name), errors="replace").read()
        for number, line in violations(text):
            problems.append(f"client/report/{name}:{number}: {line}")
    for problem in problems:
        print(problem, "-- client/report is pure: files and processes go to client/render/")
    print(f"client/report: {len(problems)} file or process call(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
