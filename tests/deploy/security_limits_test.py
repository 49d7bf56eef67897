#!/usr/bin/env python3
"""docs/security.md's limits table against the code (issue 44): each row's limit is enforced where
the page says, with the value it says, and a test that checks it exists.

  security_limits_test.py SOURCE_DIR

The section "## Limits" holds one table, | limit | value | enforced by | test | what a user sees |.
In each row:
- value: the number in backticks (`1048576`, `1e-3`) is the limit; a row without one is checked
  for its symbol or code only;
- enforced by: `FILE` then `SYMBOL` or `CODE`, one or more such pairs (a `FILE` starts a pair).
  A SYMBOL (an identifier, or Struct::member) must be defined in FILE as `SYMBOL = EXPR` with EXPR
  evaluating to the value (other constants of FILE may appear in EXPR); CODE must appear in FILE
  verbatim (blanks aside) and, where the row has a value, hold it as a number;
- test: `Suite.Name` (a TEST, TEST_F or TEST_P under tests/) or a ctest name (add_test), one or
  more; "none yet" says that no test checks the limit (listed, not a failure).
Every problem names the row's line and limit and says what is wrong. Exit 0 when all rows hold.
"""
import ast
import os
import re
import sys

HEADER = ["limit", "value", "enforced by", "test", "what a user sees"]
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)?$")
NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
TEST_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
CTEST_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def split_row(line):
    """The cells of a Markdown table row; `\\|` is a literal bar."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def code_spans(cell):
    return re.findall(r"`([^`]+)`", cell)


def limits_table(text):
    """(line number, cells) of each row of the Limits section's one table, and problems."""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("## Limits")), None)
    if start is None:
        return [], ["docs/security.md has no section '## Limits'"]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    problems, rows, tables = [], [], 0
    i = start + 1
    while i < end:
        if lines[i].startswith("|"):
            tables += 1
            header = [c.lower() for c in split_row(lines[i])]
            if header != HEADER:
                problems.append(f"line {i + 1}: a table of the Limits section with columns "
                                f"{header}; the section has one table, columns {HEADER}: merge "
                                "its rows into it")
            i += 2  # the header and its |---| line
            while i < end and lines[i].startswith("|"):
                if header == HEADER:
                    rows.append((i + 1, split_row(lines[i])))
                i += 1
        i += 1
    if tables != 1:
        problems.append(f"the Limits section has {tables} tables; it must have exactly one")
    return rows, problems


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def c_expression(expr, constants, depth=0):
    """The value of a C++ constant expression of numbers, + - * / << >> and named constants."""
    expr = expr.replace("'", "")
    expr = re.sub(r"\b(u?int(8|16|32|64)_t|size_t|ptrdiff_t|double|int|long)\s*\{([^{}]*)\}",
                  r"(\3)", expr)
    expr = re.sub(r"static_cast<[^<>]*>", "", expr)
    expr = re.sub(r"\b(\d+(\.\d*)?([eE][-+]?\d+)?)(ULL|ull|LL|ll|UL|ul|u|U|L|l|f)\b", r"\1", expr)
    for name in set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", expr)):
        if depth > 8 or name not in constants:
            raise ValueError(f"'{name}' is not a constant of the file")
        value = c_expression(constants[name], constants, depth + 1)
        expr = re.sub(rf"\b{name}\b", f"({value!r})", expr)
    tree = ast.parse(expr.strip(), mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult,
               ast.Div, ast.LShift, ast.RShift, ast.USub, ast.UAdd)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ValueError(f"'{expr.strip()}' is not a plain constant expression")
    return eval(compile(tree, "<limit>", "eval"))  # only numbers and arithmetic, checked above


def definitions(code):
    """name -> initializer of every `name = EXPR;` of `code` (the first one wins)."""
    found = {}
    for name, expr in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?<![=!<>])=(?!=)\s*([^;]+);",
                                 code):
        found.setdefault(name, expr)
    return found


def symbol_value(code, symbol):
    """The initializer of `symbol` in `code` (Struct::member: inside struct or class Struct)."""
    if "::" in symbol:
        owner, member = symbol.split("::")
        match = re.search(rf"\b(struct|class)\s+{owner}\b[^;{{]*\{{", code)
        if match is None:
            return None, f"has no struct or class {owner}"
        body = code[match.end():]
        symbol = member
    else:
        body = code
    match = re.search(rf"\b{symbol}\s*=\s*([^;]+);", body)
    if match is None:
        return None, f"defines no {symbol} = …;"
    return match.group(1), None


def numbers_in(code):
    values = []
    for literal in re.findall(r"(?<![A-Za-z_])\d[\d']*(?:\.\d*)?(?:[eE][-+]?\d+)?", code):
        try:
            values.append(float(literal.replace("'", "")))
        except ValueError:
            pass
    return values


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def check_enforcement(source, cell, value):
    """Problems with the 'enforced by' cell of a row whose limit is `value` (None: no number)."""
    spans = code_spans(cell)
    if not spans:
        return ["'enforced by' names no file and symbol in backticks"]
    problems, current, code, pairs = [], None, None, 0
    for span in spans:
        path = os.path.join(source, span)
        if "/" in span and " " not in span and os.path.isfile(path):
            current, code, pairs = span, open(path, encoding="utf-8").read(), pairs
            continue
        if current is None:
            problems.append(f"'{span}' comes before any file (the cell starts with `FILE`)")
            continue
        pairs += 1
        if IDENTIFIER.match(span) and not span.startswith(("O_", "SQLITE_")):
            problems += check_symbol(current, strip_comments(code), span, value)
        else:
            problems += check_code(current, code, span, value)
    if pairs == 0:
        problems.append(f"'enforced by' names no symbol or code after {current or 'a file'} "
                        "(or the file does not exist)")
    return problems


def check_symbol(path, code, symbol, value):
    expr, why = symbol_value(code, symbol)
    if why is not None:
        if value is None and re.search(rf"\b{symbol.split('::')[-1]}\b", code):
            return []  # a function or type named as where the rule lives
        return [f"{path} {why}"]
    if value is None:
        return []
    try:
        actual = c_expression(expr, definitions(code))
    except (ValueError, SyntaxError) as error:
        return [f"{path}: {symbol} = {expr.strip()}: cannot evaluate it ({error})"]
    if not close(float(actual), value):
        return [f"{path}: {symbol} = {expr.strip()} is {actual:g}, but the page says {value:g}"]
    return []


def check_code(path, code, snippet, value):
    squeeze = lambda text: re.sub(r"\s+", "", text)  # noqa: E731
    if squeeze(snippet) not in squeeze(code):
        return [f"{path} does not contain `{snippet}`"]
    if value is not None and not any(close(n, abs(value)) for n in numbers_in(snippet)):
        return [f"`{snippet}` does not hold the page's value {value:g}"]
    return []


def known_tests(source):
    """Suite.Name of every GoogleTest under tests/, and every add_test NAME of the project."""
    gtests, ctests = set(), set()
    for root, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "third_party")]
        for name in files:
            path = os.path.join(root, name)
            if name.endswith((".cc", ".h")) and "/tests/" in path + "/":
                text = open(path, encoding="utf-8", errors="replace").read()
                for suite, test in re.findall(
                        r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", text):
                    gtests.add(f"{suite}.{test}")
            elif name == "CMakeLists.txt":
                text = open(path, encoding="utf-8", errors="replace").read()
                ctests.update(re.findall(r"add_test\(\s*NAME\s+(\w+)", text))
                if "spheret_fuzz_replay" in text:  # fuzz_replay_<target> (tests/fuzz)
                    ctests.update("fuzz_replay_" + t for t in
                                  re.findall(r"spheret_fuzz_replay\((\w+)", text))
    return gtests, ctests


def check_tests(cell, gtests, ctests):
    if cell.strip().lower().startswith("none yet"):
        return [], True
    names = code_spans(cell)
    if not names:
        return ["'test' names no test in backticks (or says 'none yet')"], False
    problems = []
    for name in names:
        if TEST_ID.match(name):
            if name not in gtests:
                problems.append(f"no TEST, TEST_F or TEST_P ({name.replace('.', ', ')}) under "
                                "tests/")
        elif CTEST_NAME.match(name):
            if name not in ctests:
                problems.append(f"no ctest named {name} (add_test NAME {name})")
        else:
            problems.append(f"'{name}' is neither Suite.Name nor a ctest name")
    return problems, False


def main():
    source = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    page = os.path.join(source, "docs", "security.md")
    rows, problems = limits_table(open(page, encoding="utf-8").read())
    gtests, ctests = known_tests(source)
    untested = []
    for line, cells in rows:
        name = cells[0] if cells else "?"
        where = f"docs/security.md line {line} ({name[:70]})"
        if len(cells) != len(HEADER):
            problems.append(f"{where}: {len(cells)} cells, not {len(HEADER)}")
            continue
        numbers = [s for s in code_spans(cells[1]) if NUMBER.match(s)]
        if len(numbers) > 1:
            problems.append(f"{where}: value has {len(numbers)} numbers in backticks; give one")
        value = float(numbers[0]) if numbers else None
        problems += [f"{where}: {p}" for p in check_enforcement(source, cells[2], value)]
        test_problems, none = check_tests(cells[3], gtests, ctests)
        problems += [f"{where}: {p}" for p in test_problems]
        if none:
            untested.append(where)
    if len(rows) < 10:
        problems.append(f"the Limits table has {len(rows)} rows; it lists every limit")
    for where in untested:
        print("no test yet:", where)
    for problem in problems:
        print("FAIL:", problem)
    print(f"security limits: {len(rows)} rows, {len(untested)} without a test, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
