#!/usr/bin/env python3
"""Method `scripted` (issue 46): connections written in Python, scripted with torch.jit.script
(examples/connections/connections.py), trained by spheret-lm with no Python at run time.

  scripted_connection_test.py SPHERET_LM EXAMPLES_CONNECTIONS_PY

- pre_ln's residual add in Python trains to method pre_ln's losses, and the Python GeoNorm to
  method geonorm's at fused: false (100 steps, same seed; the same ops in the same order, so
  within float tolerance, and in practice equal);
- a scripted run stopped at step 50 and resumed trains to the uninterrupted run's losses bit for
  bit; a resume onto a changed file, a file of another hash than connection_sha256, a file that
  is not TorchScript and a forward of the wrong arity are refused, each naming what is wrong;
- the generic diagnostics (and the update Jacobian's singular values) are written for it, the
  sphere methods' alone (alpha, theta2, ...) are not; its run folder serves `sample`.
(Per-sublayer copies of the parameters: tests/worker/nn/scripted_connection_test.cc.)"""
import json
import os
import subprocess
import sys
import tempfile

LM, CONNECTIONS_PY = sys.argv[1], sys.argv[2]
failures = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail else ''}")
    if not ok:
        failures.append(what)


def train(out, *sets, resume=False):
    args = [LM, "train", "--out", out, *COMMON, *[a for s in sets for a in ("--set", s)]]
    result = subprocess.run(args + (["--resume"] if resume else []), capture_output=True,
                            text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, events


def losses(events):
    return {e["step"]: e["value"] for e in events
            if e["type"] == "metric" and e["name"] == "train/loss"}


def error_line(result):
    return next((l for l in result.stderr.splitlines() if "error:" in l), "")


with tempfile.TemporaryDirectory() as tmp:
    scripts = os.path.join(tmp, "connections")
    made = subprocess.run([sys.executable, CONNECTIONS_PY, scripts, "128"], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    pt = {name: os.path.join(scripts, name + ".pt")
          for name in ("pre_ln_residual", "rezero", "dyt_residual", "geonorm")}
    with open(os.path.join(tmp, "corpus.txt"), "w") as out:
        out.write("".join(f"line {i}: the quick brown fox jumps over the lazy dog\n"
                          for i in range(400)))
    assert subprocess.run([LM, "prepare", "--input", os.path.join(tmp, "corpus.txt"), "--out",
                           os.path.join(tmp, "data", "tiny")], capture_output=True).returncode == 0
    COMMON = ["--data-root", os.path.join(tmp, "data"), "--set", "dataset=tiny", "--set",
              "scale=xs", "--set", "block_size=32", "--set", "batch_size=4", "--set",
              "gradient_accumulation_steps=1", "--set", "warmup_iters=2", "--set",
              "lr_decay_iters=100", "--set", "eval_interval=25", "--set", "eval_iters=2"]
    run = lambda name: os.path.join(tmp, name)  # noqa: E731

    for builtin, script, extra in (("pre_ln", "pre_ln_residual", []),
                                   ("geonorm", "geonorm", ["fused=false"])):
        _, a = train(run(builtin), f"method={builtin}", "max_iters=100", *extra)
        _, b = train(run("s_" + script), "method=scripted", f"connection={pt[script]}",
                     "max_iters=100")
        la, lb = losses(a), losses(b)
        worst = max((abs(la[k] - lb[k]) for k in la), default=float("inf"))
        check(f"scripted {script} trains to method {builtin}'s losses",
              len(la) == 100 and la.keys() == lb.keys() and worst <= 1e-5,
              f"{len(la)} steps, largest difference {worst:.3g}, last {la.get(99)} {lb.get(99)}")

    dyt = ("method=scripted", f"connection={pt['dyt_residual']}")
    _, whole = train(run("whole"), *dyt, "max_iters=100")
    _, first = train(run("half"), *dyt, "max_iters=50")
    resumed_result, rest = train(run("half"), *dyt, "max_iters=100", resume=True)
    joined = {**losses(first), **losses(rest)}
    same = losses(whole) == joined and len(joined) == 100 and min(losses(rest)) == 50
    check("a scripted run resumes bit-exactly", same,
          f"{len(joined)} steps, resumed from {min(losses(rest), default=None)}")

    changed, _ = train(run("half"), "method=scripted", f"connection={pt['rezero']}",
                       "max_iters=100", resume=True)
    line = error_line(changed)
    sha = lambda path: __import__("hashlib").sha256(open(path, "rb").read()).hexdigest()  # noqa
    check("a resume onto a changed file is refused naming both hashes",
          changed.returncode == 1 and sha(pt["dyt_residual"]) in line and sha(pt["rezero"]) in line,
          line)

    wrong, _ = train(run("wrong"), *dyt, "max_iters=2", "connection_sha256=" + "0" * 64)
    line = error_line(wrong)
    check("a file of another hash than connection_sha256 is refused",
          wrong.returncode == 1 and sha(pt["dyt_residual"]) in line and "0" * 64 in line, line)

    bogus = os.path.join(tmp, "bogus.pt")
    with open(bogus, "w") as out:
        out.write("not a zip archive\n")
    bad, _ = train(run("bogus"), "method=scripted", f"connection={bogus}", "max_iters=2")
    check("a file that is not TorchScript is refused",
          bad.returncode == 1 and "not a TorchScript module" in error_line(bad), error_line(bad))

    arity = os.path.join(tmp, "arity.pt")
    with open(os.path.join(tmp, "arity.py"), "w") as out:  # TorchScript reads the source
        out.write("import sys, torch\n"
                  "class M(torch.nn.Module):\n"
                  "    def forward(self, h, f):\n"
                  "        return h + f\n"
                  "torch.jit.script(M()).save(sys.argv[1])\n")
    subprocess.run([sys.executable, os.path.join(tmp, "arity.py"), arity], check=True,
                   timeout=120)
    bad, _ = train(run("arity"), "method=scripted", f"connection={arity}", "max_iters=2")
    check("a forward without (h, f, index, count) is refused",
          bad.returncode == 1 and "(h, f, index: int, count: int)" in error_line(bad),
          error_line(bad))

    missing, _ = train(run("missing"), "method=scripted", "max_iters=2")
    check("method scripted without a connection is refused",
          missing.returncode == 1 and "'connection'" in error_line(missing), error_line(missing))

    result, events = train(run("diag"), "method=scripted", f"connection={pt['rezero']}",
                           "max_iters=10", "block_size=16", "diag_interval=5",
                           "jacobian_interval=5")
    diag = [e["values"] | {"step": e["step"]} for e in events
            if e["type"] == "diag" and "hidden_norm" in e["values"]]
    generic = {"hidden_norm", "theta", "radial", "token_cos", "eff_rank", "jac_sigma_max"}
    sphere_only = {"alpha", "theta2", "at_cap", "b_norm", "eta", "delta", "margin"}
    check("the generic diagnostics are written for a scripted connection, the sphere's are not",
          result.returncode == 0 and len(diag) == 2 * 4 * 2
          and all(generic <= d.keys() and not (sphere_only & d.keys()) for d in diag),
          sorted(set(diag[0]) - {"step"}) if diag else result.stderr[-300:])
    # ReZero at init is the identity: the update's Jacobian has every singular value 1.
    check("ReZero's update Jacobian at init is the identity",
          all(abs(d["jac_sigma_max"] - 1) < 1e-9 for d in diag if d["step"] == 0))

    # Its run folder serves `sample` (the config names the file and its hash).
    _, trained = train(run("rezero"), "method=scripted", f"connection={pt['rezero']}",
                       "max_iters=20", "lr_decay_iters=20")
    sampled = subprocess.run([LM, "sample", "--run", run("rezero"), "--tokens", "4"],
                             capture_output=True, text=True, timeout=120)
    check("a scripted run's checkpoint loads for sampling (the script's bytes come with it)",
          sampled.returncode == 0, sampled.stderr[-300:])

if failures:
    sys.exit("FAILED: " + "; ".join(failures))
print("all scripted-connection checks passed")
