#!/usr/bin/env python3
"""scripts/check_layout.py's rules 7 and 8 (one datum, one place) count and fail.

Copies the source tree (no build folders) into a temporary folder and runs check_layout.py there:
the copy as it is passes, spelling no metric, diag field or state name outside the catalog and
the protocol. Then, in the copy:
  - client/report/results.cc compares a state with "SUCCEEDED", server/metrics/metrics.cc lists
    "theta" and a script under scripts/ names 'val/loss': the check fails naming the three places
    and counts 3 files; the same literals under protocol/ and tests/ are not counted;
  - client/commands_best.cc parses a trial's config text again (`TrialConfig(trial.config_json)`):
    the check fails naming the file as a parse site outside the process entry points.

  tests/scripts/check_layout_catalog_test.py SOURCE_DIR
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout_copy import append, check, copy_tree, expect  # noqa: E402

NAMES = "metric, diag field and state names by string outside the catalog and protocol: "
PARSES = "sites that parse a trial config: "


def main():
    source = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as temp:
        root = os.path.join(temp, "tree")
        copy_tree(source, root)
        code, output = check(root)
        expect(code == 0 and NAMES + "0 file(s), 0 site(s)" in output,
               "the unmodified copy passes and counts 0 files", output)
        parses = re.search(PARSES + r"(\d+)", output)
        expect(parses is not None, "the parse sites are counted", output)
        print(f"unmodified copy: exit {code}: {NAMES}0 file(s), 0 site(s); "
              f"{PARSES}{parses.group(1)}")

        append(root, "client/report/results.cc",
               'bool Done(const std::string& s) { return s == "SUCCEEDED"; }\n')
        append(root, "server/metrics/metrics.cc", 'const char* kField = "theta";\n')
        append(root, "scripts/tool.py", "METRIC = 'val/loss'\n")
        append(root, "protocol/extra.cc", 'const char* kName = "val/ppl";\n')
        append(root, "tests/client/extra_test.cc", 'const char* kState = "PRUNED";\n')
        code, output = check(root)
        lines = output.splitlines()
        expect(code == 1, "a name spelled outside the catalog fails", output)
        for path, name in (("client/report/results.cc", "SUCCEEDED"),
                           ("server/metrics/metrics.cc", "theta"), ("scripts/tool.py", "val/loss")):
            expect(any(l.startswith(path + ":") and f'"{name}"' in l for l in lines),
                   f"{path} is named with its line and {name}", output)
        expect(not any(l.startswith(("protocol/", "tests/")) for l in lines),
               "protocol/ and tests/ are not counted", output)
        expect(NAMES + "3 file(s), 3 site(s)" in output, "the count is 3 files", output)
        print(f"with three files spelling names: exit {code}: {NAMES}3 file(s), 3 site(s)")

        shutil.rmtree(root)
        copy_tree(source, root)
        append(root, "client/commands_best.cc",
               "int Again(const Row& trial) { return TrialConfig(trial.config_json).size(); }\n")
        code, output = check(root)
        expect(code == 1 and any(l.startswith("client/commands_best.cc:") and
                                 "parses a trial config" in l for l in output.splitlines()),
               "a second parse of a trial's config fails, naming the file", output)
        print(f"with a config parsed again in client/commands_best.cc: exit {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
