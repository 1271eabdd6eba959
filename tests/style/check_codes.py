#!/usr/bin/env python3
"""check_codes.py - the catalogue of codes (common/include/ll/codes.h, issue 12 §2) against the sources.

Usage: check_codes.py SOURCE_DIR          check; exit 0, or 1 naming every problem
       check_codes.py SOURCE_DIR --write  regenerate docs/codes.md from codes.h

Fails when
  - a C file under common/, services/ or tools/loadctl/ uses an upper-case code literal ("CODE" in C,
    'CODE' inside an SQL string constant) that is neither in the catalogue nor in NOT_CODES below;
  - the catalogue has a code no C file uses (outside codes.h);
  - the lower-case entries (loadctl verify's invariants) are not the names of verify.c's CHECKS table;
  - docs/codes.md is not the rendering of the catalogue.
Reads the source tree only; runs in well under a second.
"""
import os
import re
import sys

# Upper-case literals that are not codes, each group with its reason. A new literal must go either
# into the catalogue (codes.h) or here.
NOT_CODES = {
    # run, partition, file and dispatch statuses (docs/contract.md §3; the run and partition ones are
    # the table of common/src/rules/status.c)
    "status": """CREATED EXTRACTING EXTRACTED_VALIDATED STAGE_VALIDATING STAGING_VALIDATED PUBLISHING PUBLISHED
        SUCCESS FAILED_MANIFEST FAILED_EXTRACT FAILED_STAGE_VALIDATION FAILED_PUBLISH FAILED_TARGET_VALIDATION
        FAILED_SNAPSHOT_EXPIRED TIMED_OUT PENDING RUNNING RETRY FAILED WRITTEN SENT ACKED DEAD""",
    # validation results and stages (docs/contract.md §2.4, §3.5), metric names, error stages and classes
    "validation": """PASS FAIL WARN SOURCE STAGING TARGET SOURCE_COUNT STAGE_COUNT TARGET_COUNT""",
    "error_stage": """MANIFEST PARTITION_GATE PUBLISH SWEEPER SNAPSHOT OPERATOR""",
    # event levels and the process group / processor names of load_event (docs/contract.md §8)
    "event_field": """INFO ERROR LOAD_CONTROL_API LOADLEDGER""",
    # dispatch types (docs/contract.md §2.5) and the sweeper's recovery.mode values (docs/contract.md §9)
    "dispatch_type": """VALIDATE_RUN REISSUE_PARTITION REISSUE""",
    # the schema registry's schemaType of an Avro schema (Confluent REST API; registry.c)
    "registry": """AVRO""",
    # the NULL partition id (docs/contract.md §4.1), SQL keywords and time zone, HTTP methods
    "syntax": """NULL BEGIN COMMIT ROLLBACK UTC GET HEAD NOTHING""",
    # the obs.c metric label for an outcome/code outside the known set; a substring loadctl matches
    "label": """OTHER NOT_FOUND""",
    # environment variables and a macro name in a message
    "environment": """LOADLEDGER_ LOADLEDGER_CONFIG LOADLEDGER_DB__CONNINFO LL_PG_CONNINFO LL_SCHEMA_DIR
        LL_MIGRATIONS_DIR PGAPPNAME PGCONNECT_TIMEOUT USER SUDO_USER TERM LC_N_ROUTES MALLOC_ARENA_MAX""",
    # the SQLSTATE-shaped class loadledger gives a refused position write in ll_db.err (position.c;
    # never sent to a client: the batch is undone and the loop rewinds)
    "sqlstate": """LL001""",
    # nifi_ops.input_refusal.kind (migration 0013; position.c) and the code recorded for a
    # refusal whose reply named none (never sent: the row only restates the reply it holds)
    "refusal_kind": """REPLY UNKNOWN""",
    # column headers of loadctl's text tables
    "column": """ACTUAL ATT ATTEMPTS CHUNKS CLASS CODE DISPATCH EXPECTED EXTRACTED HELD IDLE INPUTS JOB METRIC
        OUTBOX PARTITION PARTS REASON RESULT ROWS RUN SERVICE STAGE STATE STATUS TYPE VERSION WORKER
        APPLIED_AT APPLIED_BY SHA256""",
}
# ISO-8601 durations (configuration defaults) are not codes either.
DURATION = re.compile(r"P(T?[0-9]+[DHMS])+")
# Codes built from a format: the literal, and the prefixes it is printed with.
TEMPLATES = {"%s_METRIC_FAILED": ("STAGING", "TARGET")}

DIRS = ("common", "services", os.path.join("tools", "loadctl"))
CATALOGUE = os.path.join("common", "include", "ll", "codes.h")
DOC = os.path.join("docs", "codes.md")
VERIFY = os.path.join("tools", "loadctl", "verify.c")

ENTRY = re.compile(r'X\((\w+), ([A-Z_| ]+), "([^"]*)", "((?:[^"\\]|\\.)*)"\)')
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
CODE = re.compile(r"[A-Z][A-Z0-9_]{2,}")
WHERE = {"LL_CW_OUTCOME": "outcome", "LL_CW_REPLY": "reply", "LL_CW_DEAD": "dead letter",
         "LL_CW_EVENT": "event", "LL_CW_ERROR": "error code", "LL_CW_LOADCTL": "loadctl"}
SECTION = {"C": "contract", "K": "contract", "D": "design.md"}


def catalogue(root):
    """The entries of codes.h: a list of (name, [where], section, meaning)."""
    text = open(os.path.join(root, CATALOGUE), encoding="utf-8").read()
    out = []
    for line in text.splitlines():
        group = re.match(r"\s*/\* (.*?) \*/ \\$", line)
        for name, where, section, meaning in ENTRY.findall(line):
            out.append((name, [WHERE[w.strip()] for w in where.split("|")], section, meaning.replace('\\"', '"')))
        if group:
            out.append((None, group.group(1), None, None))
    return out


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def used_codes(root):
    """Every upper-case literal of the C sources: {code: set of files}."""
    used = {}
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if not f.endswith((".c", ".h")) or rel == CATALOGUE:
                    continue
                for s in STRING.findall(strip_comments(open(path, encoding="utf-8").read())):
                    names = [s] if CODE.fullmatch(s) else re.findall(r"'([A-Z][A-Z0-9_]{2,})'", s)
                    names += [p + t[2:] for t, ps in TEMPLATES.items() if s == t for p in ps]
                    if re.fullmatch(r"%s_[A-Z0-9_]+", s) and s not in TEMPLATES:
                        names.append("template " + s)
                    for n in names:
                        used.setdefault(n, set()).add(rel)
    return used


def invariants(root):
    """The names of loadctl verify's CHECKS table."""
    src = open(os.path.join(root, VERIFY), encoding="utf-8").read()
    table = re.search(r"CHECKS\[[A-Z_]+\] = \{(.*?)\n\};", src, re.S)
    return set(re.findall(r'\{"([a-z_]+)",', table.group(1))) if table else set()


def render(entries):
    """docs/codes.md: the catalogue as one page."""
    lines = [
        "# Codes",
        "",
        "Every code loadledger speaks, on one page: the outcome and rejection codes of a reply, the",
        "error code of a dead letter (header `ll.error.code`), the event names and error codes written",
        "to `load_event`, the codes of `loadctl`'s JSON errors and the names of `loadctl verify`'s",
        "invariants. Generated from `common/include/ll/codes.h` by `tests/style/check_codes.py --write`;",
        "the test `style.codes` fails when a C source uses a code this table lacks, when the table has",
        "a code nothing uses, or when this page is stale. Edit `codes.h`, then regenerate.",
        "",
        "From: *outcome* / *reply* = a field of the reply record, *dead letter* = the dead-letter topic,",
        "*event* = `load_event.event_name`, *error code* = an `error_code` column, *loadctl* = the tool.",
        "Section: *contract* = `docs/contract.md` (§N the reference's rules, K§N the Kafka edition's),",
        "*design.md* = `docs/design.md`, *loadctl* = `tools/loadctl/README.md`.",
        "",
        "| Code | From | Section | Meaning |",
        "|---|---|---|---|",
    ]
    for name, where, section, meaning in entries:
        if name is None:
            lines.append("| **%s** | | | |" % where)
            continue
        # the Kafka edition's sections are docs/contract.md's K§N
        sec = "loadctl" if section == "L" else SECTION[section[0]] + " " + (section if section[0] == "K" else section[1:])
        lines.append("| `%s` | %s | %s | %s |" % (name, ", ".join(where), sec, meaning.replace("|", "\\|")))
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    table = catalogue(root)
    entries = [e for e in table if e[0] is not None]
    if "--write" in argv[2:]:
        with open(os.path.join(root, DOC), "w", encoding="utf-8") as f:
            f.write(render(table))
        return 0
    problems = []
    names = [e[0] for e in entries]
    if len(entries) < 50:
        problems.append("%s: only %d entries parsed (format changed?)" % (CATALOGUE, len(entries)))
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append("%s: %s listed twice" % (CATALOGUE, n))
    for name, where, section, meaning in entries:
        if not re.fullmatch(r"(C§[0-9.]+|K§[0-9]+|D§[0-9]+|L)", section) or not meaning:
            problems.append("%s: %s needs a section (C§n, K§n, D§n, L) and a meaning" % (CATALOGUE, name))
    upper = {n for n in names if CODE.fullmatch(n)}
    lower = set(names) - upper
    not_codes = {w for group in NOT_CODES.values() for w in group.split()}
    used = used_codes(root)
    for code, files in sorted(used.items()):
        if code not in upper and code not in not_codes and not DURATION.fullmatch(code):
            problems.append("%s: code %s is not in %s (add it there, or to NOT_CODES in %s with its reason)"
                            % (", ".join(sorted(files)), code, CATALOGUE, os.path.basename(__file__)))
    for code in sorted(upper - set(used)):
        problems.append("%s: %s is used by no C source (remove it)" % (CATALOGUE, code))
    for code in sorted(upper & not_codes):
        problems.append("%s: %s is both a code and in NOT_CODES" % (CATALOGUE, code))
    inv = invariants(root)
    for name in sorted(lower ^ inv):
        problems.append("%s: invariant %s is in only one of codes.h and %s's CHECKS" % (CATALOGUE, name, VERIFY))
    doc = os.path.join(root, DOC)
    if not os.path.exists(doc) or open(doc, encoding="utf-8").read() != render(table):
        problems.append("%s is stale: run tests/style/check_codes.py . --write" % DOC)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("codes: %d in the catalogue, %d distinct upper-case literals checked" % (len(entries), len(used)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
