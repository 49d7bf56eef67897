#!/usr/bin/env python3
"""docs/methods.md's walk-through "Adding a built-in method" stays true.

tests/data/toy_method.patch adds a toy built-in method, toy_residual (h + 0.5 F(LN(h))), through
the walk-through's steps.

  toy_method_test.py SOURCE_DIR           the walk-through lists exactly the files the patch
                                          touches, and the patch applies to the tree (`git apply
                                          --check`; skipped, exit 77, where the tree is not a git
                                          checkout)
  toy_method_test.py SOURCE_DIR --build   (slow) on a copy of the tree: applies the patch, builds
                                          spheret-lm alone (SPHERET_TRAINER_ONLY=ON, ccache),
                                          trains method=toy_residual for a few steps on the
                                          fortunes corpus and runs scripts/check_layout.py there
                                          (no problem, 0 files naming methods by string)
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PATCH = os.path.join("tests", "data", "toy_method.patch")
BEGIN, END = "<!-- toy method files: begin -->", "<!-- toy method files: end -->"
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "build-*", "data", "runs", "out",
                              "bench-results", "__pycache__")


def fail(message, output=""):
    print(f"FAILED: {message}" + (f"\n{output}" if output else ""))
    sys.exit(1)


def documented_files(source):
    text = open(os.path.join(source, "docs", "methods.md")).read()
    if BEGIN not in text or END not in text:
        fail(f"docs/methods.md has no list between {BEGIN} and {END}")
    block = text[text.index(BEGIN):text.index(END)]
    return sorted(re.findall(r"^- `([^`]+)`", block, re.M))


def patched_files(source):
    text = open(os.path.join(source, PATCH)).read()
    return sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))


def check_list_and_apply(source):
    documented, patched = documented_files(source), patched_files(source)
    if documented != patched:
        fail("docs/methods.md's walk-through and tests/data/toy_method.patch name different "
             f"files\n  docs:  {documented}\n  patch: {patched}")
    print(f"walk-through lists the patch's {len(patched)} files: {', '.join(patched)}")
    inside = subprocess.run(["git", "-C", source, "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True)
    if inside.returncode != 0:
        print(f"SKIPPED: git apply --check: {source} is not a git checkout")
        return 77
    check = subprocess.run(["git", "-C", source, "apply", "--check", PATCH], capture_output=True,
                           text=True)
    if check.returncode != 0:
        fail("tests/data/toy_method.patch no longer applies: redo it through docs/methods.md's "
             "steps (git diff -U1 of the toy method's change)", check.stderr)
    print("git apply --check tests/data/toy_method.patch: applies")
    return 0


def run(command, what, **kwargs):
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        fail(f"{what} (exit {done.returncode})", (done.stdout + done.stderr)[-4000:])
    print(f"{what}: {time.time() - start:.0f} s")
    return done.stdout


def build_and_train(source, tree):
    shutil.copytree(source, tree, ignore=SKIP, symlinks=True)
    venv = os.path.join(source, ".venv")
    if os.path.exists(venv):
        os.symlink(os.path.realpath(venv), os.path.join(tree, ".venv"))
    run(["git", "apply", os.path.join(source, PATCH)], "git apply the toy method", cwd=tree)
    env = dict(os.environ, CCACHE_BASEDIR=tree)  # cache hits across copies at other paths
    build = os.path.join(tree, "build")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    run(["cmake", "-S", tree, "-B", build, *generator, "-DSPHERET_TRAINER_ONLY=ON",
         "-DSPHERET_TESTS=OFF"], "configure (trainer only)", env=env)
    run(["cmake", "--build", build, "-j2", "--target", "spheret-lm"], "build spheret-lm", env=env)
    lm = os.path.join(build, "bin", "spheret-lm")
    data = os.path.join(tree, "data", "fortunes")
    run([lm, "prepare", "--builtin", "fortunes", "--out", data], "prepare fortunes")
    sets = ["dataset=" + data, "method=toy_residual", "max_iters=4", "lr_decay_iters=4",
            "warmup_iters=1", "eval_interval=4", "eval_iters=2", "block_size=64", "batch_size=4"]
    command = [lm, "train", "--config", os.path.join(tree, "configs", "demo.json"), "--out",
               os.path.join(tree, "runs", "toy")]
    for item in sets:
        command += ["--set", item]
    events = [json.loads(line) for line in run(command, "train toy_residual 4 steps").splitlines()
              if line.startswith("{")]
    done = [e for e in events if e.get("type") == "done"]
    if not done or done[0]["step"] != 4 or not math.isfinite(done[0]["val_loss"]):
        fail("the toy method's run did not finish 4 steps with a finite val loss", str(done))
    print(f"toy_residual: {done[0]['step']} steps, val loss {done[0]['val_loss']:.4f}")
    layout = subprocess.run([sys.executable, os.path.join(tree, "scripts", "check_layout.py"),
                             "--root", tree], capture_output=True, text=True)
    summary = "method names by string outside the registry and worker/nn: 0 file(s)"
    if layout.returncode != 0 or summary not in layout.stdout:
        fail("check_layout.py on the patched copy", layout.stdout + layout.stderr)
    print("check_layout.py on the patched copy: " + layout.stdout.strip().splitlines()[-1])
    print(summary)


def main():
    source = os.path.abspath(sys.argv[1])
    if "--build" not in sys.argv[2:]:
        return check_list_and_apply(source)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="toy_method_") as temp:
        build_and_train(source, os.path.join(temp, "tree"))
    print(f"toy method end to end: {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
