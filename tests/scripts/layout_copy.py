"""What the layout rules' own tests share: a copy of the source tree (no build folders, no
virtual environment) and scripts/check_layout.py run on it.
"""
import os
import shutil
import subprocess
import sys

SKIP = shutil.ignore_patterns(".git", ".venv", "build", "build-*", "data", "runs", "out",
                              "bench-results", "__pycache__")


def copy_tree(source, root):
    shutil.copytree(source, root, ignore=SKIP, symlinks=True)


def check(root):
    """(exit code, stdout + stderr) of check_layout.py --root ROOT."""
    script = os.path.join(root, "scripts", "check_layout.py")
    run = subprocess.run([sys.executable, script, "--root", root], capture_output=True, text=True,
                         timeout=60)
    return run.returncode, run.stdout + run.stderr


def expect(condition, message, output):
    if not condition:
        print(f"FAILED: {message}\n--- check_layout.py printed:\n{output}")
        sys.exit(1)


def append(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "a") as out:
        out.write(text)
