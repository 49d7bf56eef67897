"""Every target of the CMake files and what it links, read without running CMake.

Used by check_layout.py for the rule "no target links both LibTorch and gRPC": the trainer
(spheret-lm and its LibTorch libraries) and the gRPC side (daemon, coordinator, CLI) meet only
through processes and files, never in one binary.

What is read: add_library / add_executable (ALIAS names resolved), target_link_libraries (all
of PUBLIC, PRIVATE and INTERFACE: a static library's private links end up in the binary too),
set() of plain variables, and function() bodies expanded at each call with their arguments
(${ARGN} included). Every CMakeLists.txt counts, tests, fuzzers and the libFuzzer sub-project
included, and cmake/*.cmake (spheret::torch is defined there).
"""
import collections
import os
import re

# What makes a target reach LibTorch or gRPC (link items as written in the CMake files).
LIBTORCH = re.compile(r"^(\$\{TORCH_LIBRARIES\}|Torch::\w+|torch|torch_cpu|torch_cuda|c10)$")
GRPC = re.compile(r"^(gRPC::[\w+]+|protobuf::[\w+]+|\$\{Protobuf_LIBRARIES\}|"
                  r"\$\{PROTOBUF_LIBRARIES\}|\$\{SPHERET_PROTO_LIB\})$")
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE",
            "LINK_INTERFACE_LIBRARIES"}
SKIP_DIRS = {"build", ".venv", ".git", "node_modules", "corpus"}


def cmake_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name == "CMakeLists.txt" or (name.endswith(".cmake") and
                                            os.path.basename(folder) == "cmake"):
                yield os.path.join(folder, name)


def strip_comments(text):
    """The text without # comments (a # inside a quoted argument stays)."""
    out = []
    for line in text.split("\n"):
        quoted = False
        for index, char in enumerate(line):
            if char == '"':
                quoted = not quoted
            elif char == "#" and not quoted:
                line = line[:index]
                break
        out.append(line)
    return "\n".join(out)


def commands(text):
    """[(command name in lower case, [arguments])] of one CMake file, in order."""
    text = strip_comments(text)
    found = []
    for match in re.finditer(r"\b(\w+)\s*\(", text):
        depth, index = 1, match.end()
        while index < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            index += 1
        body = text[match.end():index - 1]
        args = [a.strip('"') for a in re.findall(r'"(?:\\.|[^"\\])*"|[^\s"]+', body)]
        found.append((match.group(1).lower(), args, match.start(), index))
    # Keep only top-level commands (a command's arguments are not commands).
    result, end = [], -1
    for name, args, start, stop in found:
        if start >= end:
            result.append((name, args))
            end = stop
    return result


def expand(args, variables):
    out = []
    for arg in args:
        whole = re.fullmatch(r"\$\{(\w+)\}", arg)
        if whole and whole.group(1) in variables:
            out.extend(variables[whole.group(1)])
            continue
        out.append(re.sub(r"\$\{(\w+)\}",
                          lambda m: " ".join(variables[m.group(1)]) if m.group(1) in variables
                          else m.group(0), arg))
    return out


class Targets:
    """The targets (name -> set of link items) and the ALIAS names of a source tree."""

    def __init__(self, root):
        self.links = collections.defaultdict(list)
        self.defined = set()
        self.aliases = {}
        self.functions = {}
        for path in cmake_files(root):
            self._run(commands(open(path, errors="replace").read()), {})

    def _run(self, cmds, variables):
        index = 0
        while index < len(cmds):
            name, args = cmds[index]
            if name == "function":
                end = index + 1
                while end < len(cmds) and cmds[end][0] != "endfunction":
                    end += 1
                self.functions[args[0].lower()] = (args[1:], cmds[index + 1:end])
                index = end + 1
                continue
            self._one(name, expand(args, variables), variables)
            index += 1

    def _one(self, name, args, variables):
        if name == "set" and args:
            variables[args[0]] = [a for a in args[1:] if a not in ("CACHE", "PARENT_SCOPE")]
        elif name in ("add_library", "add_executable") and args:
            if len(args) > 2 and args[1] == "ALIAS":
                self.aliases[args[0]] = args[2]
            elif "IMPORTED" not in args:
                self.defined.add(args[0])
        elif name == "target_link_libraries" and args:
            self.links[args[0]].extend(a for a in args[1:] if a not in KEYWORDS)
        elif name in self.functions:
            params, body = self.functions[name]
            scope = dict(variables)
            scope.update({p: [a] for p, a in zip(params, args)})
            scope["ARGN"] = args[len(params):]
            self._run(body, scope)

    def resolve(self, item):
        return self.aliases.get(item, item)

    def path_to(self, target, pattern):
        """The shortest chain of link items from `target` to one matching `pattern`, or None."""
        queue, seen = collections.deque([[target]]), {target}
        while queue:
            chain = queue.popleft()
            for item in self.links.get(self.resolve(chain[-1]), []):
                if pattern.match(item):
                    return chain + [item]
                if self.resolve(item) not in seen:
                    seen.add(self.resolve(item))
                    queue.append(chain + [item])
        return None


def check_torch_grpc(root):
    """One problem per target that reaches both LibTorch and gRPC, naming both paths."""
    targets = Targets(root)
    problems = []
    for target in sorted(targets.defined):
        torch = targets.path_to(target, LIBTORCH)
        grpc = targets.path_to(target, GRPC)
        if torch and grpc:
            problems.append(f"{target} links both LibTorch ({' -> '.join(torch)}) and gRPC "
                            f"({' -> '.join(grpc)}): the trainer and the gRPC side meet only as "
                            f"processes (docs/architecture.md)")
    return problems, targets
