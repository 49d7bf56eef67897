#!/usr/bin/env python3
"""scripts/check_layout.py's rule "no target links both LibTorch and gRPC" can fail.

Copies the tree's CMake files into a temporary folder and runs `check_layout.py --links` there:
the copy as it is passes; with the worker daemon (spheret_worker, worker/daemon) linking
spheret::train it fails, naming the daemon and its paths to LibTorch and to gRPC.

  tests/scripts/check_layout_test.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP_DIRS = {"build", ".venv", ".git", "corpus"}


def copy_cmake_files(source, target):
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                relative = os.path.relpath(os.path.join(folder, name), source)
                os.makedirs(os.path.dirname(os.path.join(target, relative)), exist_ok=True)
                shutil.copy(os.path.join(source, relative), os.path.join(target, relative))


def check(source, root):
    script = os.path.join(source, "scripts", "check_layout.py")
    run = subprocess.run([sys.executable, script, "--links", "--root", root],
                         capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def expect(condition, message, output):
    if not condition:
        print(f"FAILED: {message}\n--- check_layout.py printed:\n{output}")
        sys.exit(1)


def main():
    source = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as root:
        copy_cmake_files(source, root)
        code, output = check(source, root)
        expect(code == 0, "the unmodified copy of the CMake files passes", output)
        print(f"unmodified copy: exit {code}: {output.strip().splitlines()[-1]}")

        daemon = os.path.join(root, "worker", "daemon", "CMakeLists.txt")
        with open(daemon, "a") as cmake:
            cmake.write("target_link_libraries(spheret_worker PRIVATE spheret::train)\n")
        code, output = check(source, root)
        expect(code == 1, "the daemon linking spheret::train fails", output)
        line = next((l for l in output.splitlines() if l.startswith("spheret_worker ")), "")
        expect("LibTorch (spheret_worker -> spheret::train -> spheret::nn -> spheret::torch" in line
               and "gRPC (spheret_worker -> spheret::proto -> gRPC::grpc++)" in line,
               "the failure names the daemon and both of its paths", output)
        expect(any(l.startswith("spheret-worker ") for l in output.splitlines()),
               "the failure names the spheret-worker program too", output)
        print(f"daemon linking spheret::train: exit {code}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
