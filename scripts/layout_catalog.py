"""Rules 7 and 8 of scripts/check_layout.py: one datum, one place.

Rule 7: no file spells a metric name, a diag field name or a trial (or sweep) state's name by
string outside the catalog and the protocol (protocol/, proto/). The names are the constants of
protocol/metric_catalog.h (`inline constexpr char kX[] = "name";`) and the state names of
protocol/trial_states.cc (`{TrialState::kX, "NAME"}`). Counted like rule 6: the C++ files of the
libraries, programs and benchmarks (not tests/, whose fixtures spell names on purpose) and the
Python scripts under scripts/, holding a string literal equal to a name. "error", the metric of a
failed evaluation's event, is a word too common to count (it is also a JSON key of every event),
and a LibTorch module's parameter name (`register_parameter("alpha", ...)`) is a checkpoint key.

Rule 8: a trial's config text is turned into a typed value once where it enters a process. The
sites that parse one are constructions of a TrialConfig from text (`TrialConfig(text)`,
`TrialConfig name(text)`, a vector of them grown by `configs.emplace_back(...config_json)`)
and `json::parse(...config...)`; ENTRY lists each allowed site's file
with the way the config enters there. A site elsewhere, or more sites in an entry file than
ENTRY allows, is a problem; every run prints the count.

On a tree from before the catalog (--root on an old checkout) the names come from
protocol/trainer_events.h and server/domain/records.cc, so the rules count what it had.
"""
import os
import re

import layout_methods

ALLOWED_DIRS = ("protocol/", "proto/", "tests/", "docs/", "examples/", "reference/")
NOT_COUNTED = {"error"}
# A LibTorch module's parameter or buffer name ("alpha" of nGPT's scaling) is the checkpoint's key,
# not the diag field of the same spelling.
MODULE_NAME = re.compile(r"register_(parameter|buffer)\(")

# file -> (sites allowed, how a trial's config enters the process there)
ENTRY = {
    # The coordinator: a trial record loaded from the store (start-up, reload, a resumed or
    # confirmed trial) or created by a submission, typed once (TypeTrial) and shared.
    "server/trial_configs.cc": (1, "the coordinator: a trial record read from the store"),
    # The CLI: a reply's trial, curve, layer values or dry-run config (fetch.cc's ReadConfig).
    "client/fetch.cc": (1, "the CLI: a reply of the coordinator"),
    # The trainer: --config or a run folder's config.json (ApplyConfigFile) ...
    "worker/train/run_folder.cc": (1, "the trainer: a config file"),
    # ... and the config a checkpoint was trained with (resume and export compare it).
    "worker/train/checkpoint.cc": (1, "the trainer: a checkpoint's saved config"),
    # The campaign generator's simulated trainer: a lease's config, as spheret-lm gets it.
    "bench/campaign_db.cc": (1, "the campaign generator: a lease's config"),
}


def catalog_names(root):
    """The metric and diag field names and the state names, sorted."""
    names = set()
    sources = (("protocol/metric_catalog.h", r'inline constexpr char k\w+\[\]\s*=\s*"([^"]+)"'),
               ("protocol/trial_states.cc", r'\{\s*(?:Trial|Sweep)State::k\w+,\s*"([A-Z]+)"'),
               # Before the catalog.
               ("protocol/trainer_events.h", r'inline constexpr char k(?:Train|Val)\w*\[\]\s*=\s*'
                                             r'"([^"]+)"'),
               ("server/domain/records.cc", r'\{\s*(?:Trial|Sweep)State::k\w+,\s*"([A-Z]+)"'))
    for path, pattern in sources:
        full = os.path.join(root, path)
        if os.path.exists(full):
            names.update(re.findall(pattern, open(full, errors="replace").read()))
    if not os.path.exists(os.path.join(root, "protocol/metric_catalog.h")):
        server_metrics = os.path.join(root, "server/metrics/metrics.cc")
        if os.path.exists(server_metrics):  # the diag fields /metrics exported
            text = open(server_metrics, errors="replace").read()
            block = re.search(r"ExportedLayerFields\(\) \{(.*?)\};", text, re.S)
            if block:
                names.update(re.findall(r'"([a-z0-9_]+)"', block.group(1)))
    return sorted(names - NOT_COUNTED)


def python_scripts(root):
    folder = os.path.join(root, "scripts")
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join("scripts", name) for name in os.listdir(folder)
                  if name.endswith(".py") and not name.startswith("layout_") and
                  name != "check_layout.py")


def counted(path):
    return not path.startswith(ALLOWED_DIRS)


def files_spelling_names(root, cc_files):
    """{path: [(line, name), ...]} of each counted file that spells a catalog name by string."""
    return layout_methods.files_with_literals(root, cc_files, python_scripts(root),
                                              catalog_names(root), counted, MODULE_NAME)


PARSE = re.compile(r"\bTrialConfig\s*\(\s*[^)\s]|\bTrialConfig\s+\w+\s*\(\s*[^)\s]|"
                   r"json::parse\([^)]*config|configs\.emplace_back\([^)]*config_json")
# `TrialConfig ConfigOf(const v1::Trial& trial)`: a function that returns one, declared or defined.
PARAMETERS = re.compile(r"^\s*TrialConfig\s+\w+\s*\(\s*(const\s+)?[\w:<>]+(\s+|\s*[&*]+\s*)\w+\s*[,)=]")


def declares(text):
    return PARAMETERS.match(text) is not None


def config_parse_sites(root, cc_files):
    """[(path, line)] of each site that turns a trial's config text into a value."""
    sites = []
    for path in cc_files:
        if path.startswith(("config/", "tests/")):
            continue  # the type itself, and the tests that exercise it
        for number, line in enumerate(open(os.path.join(root, path), errors="replace"), 1):
            code = line.split("//")[0]
            if "CheckTrialConfig" in code:
                continue
            if any(not declares(code[m.start():]) for m in PARSE.finditer(code)):
                sites.append((path, number))
    return sites


def check_catalog_names(root, cc_files, strict):
    """(problems, summary lines)."""
    found = files_spelling_names(root, cc_files)
    problems = []
    if strict:
        for path in sorted(found):
            for number, name in found[path]:
                problems.append(f'{path}:{number}: spells "{name}" by string; read it from the '
                                f"catalog (protocol/metric_catalog.h, protocol/trial_states.h)")
    sites = sum(len(v) for v in found.values())
    summary = [f"metric, diag field and state names by string outside the catalog and protocol: "
               f"{len(found)} file(s), {sites} site(s)"]
    parse = config_parse_sites(root, cc_files)
    by_file = {}
    for path, number in parse:
        by_file.setdefault(path, []).append(number)
    if strict:
        for path, numbers in sorted(by_file.items()):
            allowed = ENTRY.get(path, (0, ""))[0]
            if len(numbers) > allowed:
                problems.append(f"{path}:{numbers[0]}: parses a trial config ({len(numbers)} "
                                f"site(s), {allowed} allowed): take the typed value from where "
                                f"the config entered the process (scripts/layout_catalog.py "
                                f"ENTRY)")
    summary.append(f"sites that parse a trial config: {len(parse)} in {len(by_file)} file(s) "
                   f"({len(ENTRY)} process entry point(s) allowed)")
    for path, number in parse:
        why = ENTRY.get(path, (0, "not a process entry point"))[1]
        summary.append(f"  {path}:{number}: {why}")
    return problems, summary
