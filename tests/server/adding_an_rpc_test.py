#!/usr/bin/env python3
"""docs/architecture.md's "Adding a coordinator RPC" against the code (issue 48): the walk-through
stays true.

  adding_an_rpc_test.py SOURCE_DIR

Checks, on SOURCE_DIR:
- every file or folder the page names in backticks exists;
- every service of proto/spheret/v1/*.proto has a row in the page's table (service, proto,
  handlers, client), and each RPC of it goes through the steps:
  1. `rpc Name(` in the row's proto file;
  2. `grpc::Status Name(` in the service's class in server/rpc/services.h;
  3. `Service::Name(` defined in the row's handler file, calling the coordinator
     (`coordinator_->Method(`, or `coordinator_->tokens().Method(` for a token RPC);
  4. each such Method declared in server/coordinator.h and defined in server/coordinator.cc,
     handing the call to a member whose class (5.) is declared in a header the page names
     (a token RPC's method: declared in TokenKeeper, server/tokens.h);
  7. the RPC called (`->Name(` or `.Name(`) by a file under the row's client folder;
  8. a test under tests/ naming the RPC or a facade method its handler calls.
Then it checks itself: a copy of the tree with a made-up RPC added to the proto, its
declaration and its handler (steps 1 to 3 only, calling no coordinator method) must be refused,
naming the RPC and each step it misses; the same copy with the RPC's proto line alone must be
refused at step 2. Exit 0 when the tree passes and the copies fail as they should.
"""
import os
import re
import shutil
import sys
import tempfile

PAGE = "docs/architecture.md"
SECTION = "## Adding a coordinator RPC"
SOURCES = (".cc", ".h", ".proto", ".py", ".md", ".txt", ".sh", ".sbatch")


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def walk_through(text):
    """The section SECTION of the page, up to the next section; None when it has none."""
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        return None
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def files_under(root, folder, exts=(".cc", ".h")):
    for base, _, names in os.walk(os.path.join(root, folder)):
        for name in names:
            if name.endswith(exts):
                yield os.path.join(base, name)


def named_paths(page):
    """The paths the page names in backticks (`server/reads.h`, `client/`)."""
    return sorted({s for s in re.findall(r"`([^`]+)`", page)
                   if re.fullmatch(r"[A-Za-z_][\w.-]*(/[\w.-]+)*/?", s) and "/" in s})


def proto_services(root):
    """{service: (proto file, [rpc names])} of proto/spheret/v1/*.proto."""
    services = {}
    folder = "proto/spheret/v1"
    for name in sorted(os.listdir(os.path.join(root, folder))):
        if not name.endswith(".proto"):
            continue
        path = f"{folder}/{name}"
        for service, body in re.findall(r"service\s+(\w+)\s*\{(.*?)\n\}", read(root, path), re.S):
            services[service] = (path, re.findall(r"^\s*rpc\s+(\w+)\s*\(", body, re.M))
    return services


def table_rows(page):
    """{service: (proto, handlers, client)} of the page's table."""
    rows = {}
    for line in page.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and re.fullmatch(r"\w+Service", cells[0]):
            rows[cells[0]] = tuple(cells[1:])
    return rows


def class_block(text, name):
    """The text of `class NAME ... {` up to its closing `};` ("" when there is none)."""
    match = re.search(r"^(class|struct)\s+" + name + r"\b[^;{]*\{(.*?)^\};", text, re.S | re.M)
    return match.group(2) if match else ""


def function_body(text, qualified):
    """The body of the function `QUALIFIED(` defined at the top level ("" when undefined)."""
    match = re.search(r"^\S.*\b" + re.escape(qualified) + r"\((.*?)^\}", text, re.S | re.M)
    return match.group(1) if match else ""


def declared_in_named_header(root, page, cls):
    for path in named_paths(page):
        if path.endswith(".h") and os.path.isfile(os.path.join(root, path)):
            if re.search(r"^(class|struct)\s+" + cls + r"\b", read(root, path), re.M):
                return True
    return False


def check_facade(root, page, method):
    """Step 4 and 5 for one facade method: problems."""
    header, source = read(root, "server/coordinator.h"), read(root, "server/coordinator.cc")
    facade = class_block(header, "Coordinator")
    if not re.search(r"\b" + method + r"\(", facade.split(" private:")[0]):
        return [f"Coordinator::{method} is not declared public in server/coordinator.h (step 4)"]
    inline = re.search(r"\b" + method + r"\([^;{]*\)\s*(const\s*)?\{([^}]*)\}", facade)
    body = inline.group(2) if inline else function_body(source, "Coordinator::" + method)
    if not body:
        return [f"Coordinator::{method} is not defined in server/coordinator.cc (step 4)"]
    members = dict((m, c) for c, m in re.findall(r"^\s+(\w+)\s+(\w+_)(?:\{[^}]*\})?;", facade, re.M))
    called = re.findall(r"\b(\w+_)\.\w+\(", body)
    if not called:
        return [f"Coordinator::{method} hands the call to no collaborator (step 4)"]
    problems = []
    for member in called:
        cls = members.get(member)
        if cls is None or not declared_in_named_header(root, page, cls):
            problems.append(f"Coordinator::{method} hands the call to {member} ({cls}), whose "
                            "class is declared in no header the page names (step 5)")
    return problems


def check_rpc(root, page, service, rpc, row, tests_text):
    proto, handlers, client = row
    problems = []
    if not re.search(r"^\s*rpc\s+" + rpc + r"\s*\(", read(root, proto), re.M):
        problems.append(f"not in {proto} (step 1)")
    declared = class_block(read(root, "server/rpc/services.h"), service)
    if not re.search(r"grpc::Status\s+" + rpc + r"\(", declared):
        problems.append(f"no handler declared in {service} of server/rpc/services.h (step 2)")
    body = function_body(read(root, handlers), f"{service}::{rpc}")
    facade = []
    if not body:
        problems.append(f"no handler {service}::{rpc} in {handlers} (step 3)")
    else:
        facade = [m for m in re.findall(r"coordinator_->(\w+)\(", body) if m not in ("tokens",
                                                                                   "options")]
        tokens = re.findall(r"coordinator_->tokens\(\)\.(\w+)\(", body)
        if not facade and not tokens:
            problems.append(f"{service}::{rpc} calls no coordinator method (step 3)")
        for method in facade:
            problems += check_facade(root, page, method)
        keeper = class_block(read(root, "server/tokens.h"), "TokenKeeper")
        for method in tokens:
            if not re.search(r"\b" + method + r"\(", keeper):
                problems.append(f"TokenKeeper::{method} is not declared in server/tokens.h "
                                "(step 5)")
    calls = re.compile(r"(->|\.)" + rpc + r"\(")
    if not any(calls.search(read(root, os.path.relpath(p, root)))
               for p in files_under(root, client)):
        problems.append(f"no file under {client} calls it (step 7)")
    names = [rpc] + facade
    if not any(re.search(r"\b" + n + r"\b", tests_text) for n in names):
        problems.append(f"no test under tests/ names it or {', '.join(facade) or 'its method'} "
                        "(step 8)")
    return [f"{service}.{rpc}: {p}" for p in problems]


def check(root):
    """Every problem of the tree at `root` against the page."""
    if not os.path.isfile(os.path.join(root, PAGE)):
        return [f"{PAGE} is missing"]
    page = walk_through(read(root, PAGE))
    if page is None:
        return [f"{PAGE} has no section {SECTION!r}"]
    problems = [f"{PAGE} names {p}, which does not exist" for p in named_paths(page)
                if not os.path.exists(os.path.join(root, p))]
    if problems:
        return problems
    rows = table_rows(page)
    tests_text = "\n".join(read(root, os.path.relpath(p, root))
                           for p in files_under(root, "tests", (".cc", ".h", ".py"))
                           if not p.endswith("adding_an_rpc_test.py"))
    for service, (proto, rpcs) in proto_services(root).items():
        row = rows.get(service)
        if row is None:
            problems.append(f"{service} ({proto}) has no row in the table of {PAGE}")
            continue
        if row[0] != proto:
            problems.append(f"{service}: the table says {row[0]}, the service is in {proto}")
            continue
        for rpc in rpcs:
            problems += check_rpc(root, page, service, rpc, row, tests_text)
    return problems


def copy_tree(root, to):
    """The parts of `root` the check reads, sources only."""
    def ignore(folder, names):
        return [n for n in names if not os.path.isdir(os.path.join(folder, n))
                and not n.endswith(SOURCES)]
    for folder in ("docs", "proto", "server", "client", "worker/daemon", "tests"):
        shutil.copytree(os.path.join(root, folder), os.path.join(to, folder), ignore=ignore,
                        dirs_exist_ok=True)


def add_made_up_rpc(to, with_handler):
    """Adds MadeUpRpc to SweepService: its proto line and, `with_handler`, its declaration and a
    handler that calls no coordinator method."""
    def edit(path, old, new):
        full = os.path.join(to, path)
        text = read(to, path)
        assert old in text, f"{path}: '{old}' not found"
        with open(full, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))
    edit("proto/spheret/v1/sweeps.proto", "service SweepService {",
         "service SweepService {\n  rpc MadeUpRpc(GetSweepRequest) returns (Sweep);")
    if not with_handler:
        return
    edit("server/rpc/services.h", "class SweepService final : public v1::SweepService::Service {",
         "class SweepService final : public v1::SweepService::Service {\n"
         "  grpc::Status MadeUpRpc(grpc::ServerContext* context, const v1::GetSweepRequest* r,\n"
         "                         v1::Sweep* response) override;")
    with open(os.path.join(to, "server/rpc/sweep_service.cc"), "a", encoding="utf-8") as f:
        f.write("\ngrpc::Status SweepService::MadeUpRpc(grpc::ServerContext* context,\n"
                "    const v1::GetSweepRequest* request, v1::Sweep* response) {\n"
                "  return grpc::Status::OK;\n}\n")


def self_test(root):
    """Problems of the check itself: copies with a made-up RPC that misses steps must fail."""
    problems = []
    expected = {True: ["calls no coordinator method (step 3)", "(step 7)", "(step 8)"],
                False: ["no handler declared in SweepService of server/rpc/services.h (step 2)",
                        "(step 3)", "(step 7)", "(step 8)"]}
    for with_handler, wanted in expected.items():
        with tempfile.TemporaryDirectory() as to:
            copy_tree(root, to)
            add_made_up_rpc(to, with_handler)
            found = [p for p in check(to) if p.startswith("SweepService.MadeUpRpc:")]
            for want in wanted:
                if not any(want in p for p in found):
                    problems.append(f"self-test (handler: {with_handler}): a made-up RPC was not "
                                    f"refused with '{want}'; it got {found}")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
    problems = check(root)
    for problem in problems:
        print(problem)
    services = proto_services(root)
    print(f"{sum(len(r) for _, r in services.values())} RPCs of {len(services)} services checked "
          f"against {PAGE}: {len(problems)} problem(s)")
    own = self_test(root)
    for problem in own:
        print(problem)
    return 1 if problems or own else 0


if __name__ == "__main__":
    sys.exit(main())
