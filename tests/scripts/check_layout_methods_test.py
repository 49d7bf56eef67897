#!/usr/bin/env python3
"""scripts/check_layout.py's rule "no file names a built-in method by string outside the registry
and worker/nn" (rule 6) counts and fails.

Copies the source tree (no build folders) into a temporary folder and runs check_layout.py there:
the copy as it is prints "0 file(s)" and passes; with a comparison to "geonorm" added to
client/report/results.cc and a Python script under scripts/ naming 'keel' it fails, naming both
places and counting 2 files; the same literals under worker/nn/ and tests/ are not counted.

  tests/scripts/check_layout_methods_test.py SOURCE_DIR
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout_copy import append, check, copy_tree, expect  # noqa: E402

SUMMARY = "method names by string outside the registry and worker/nn: "


def main():
    source = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as temp:
        root = os.path.join(temp, "tree")
        copy_tree(source, root)
        code, output = check(root)
        expect(code == 0 and SUMMARY + "0 file(s)" in output,
               "the unmodified copy passes and counts 0 files", output)
        print(f"unmodified copy: exit {code}: {SUMMARY}0 file(s)")

        append(root, "client/report/results.cc",
               'bool IsGeoNorm(const std::string& m) { return m == "geonorm"; }\n')
        append(root, "scripts/tool.py", "METHOD = 'keel'\n")
        append(root, "worker/nn/gpt.cc", '// h as "geonorm" computes it\n')
        append(root, "tests/config/extra_test.cc", 'const char* kId = "pre_ln";\n')
        code, output = check(root)
        lines = output.splitlines()
        expect(code == 1, "a method named by string outside the registry fails", output)
        expect(any(l.startswith("client/report/results.cc:") and '"geonorm"' in l for l in lines),
               "the C++ place is named with its line", output)
        expect(any(l.startswith("scripts/tool.py:1:") and '"keel"' in l for l in lines),
               "the Python script is named", output)
        expect(not any(l.startswith(("worker/nn/", "tests/")) for l in lines),
               "worker/nn and tests are not counted", output)
        expect(SUMMARY + "2 file(s)" in output, "the count is 2 files", output)
        print(f"with two files naming methods: exit {code}: {SUMMARY}2 file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
