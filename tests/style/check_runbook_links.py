#!/usr/bin/env python3
"""Every alert links a runbook section that exists (ctest style.runbook_links; issue 29 §5).

Reads packaging/prometheus/loadledger.rules.yml and fails when an alert has no `runbook_url`
annotation, or names a file other than docs/runbooks.md, or an anchor (`#name`) that
docs/runbooks.md does not define (`<a id="name"></a>`). Prints each alert and its anchor.

Usage: check_runbook_links.py SOURCE_DIR. Reads the source tree only; well under a second.
"""
import os
import re
import sys


def main(src):
    rules = open(os.path.join(src, "packaging", "prometheus", "loadledger.rules.yml"), encoding="utf-8").read()
    book = open(os.path.join(src, "docs", "runbooks.md"), encoding="utf-8").read()
    anchors = set(re.findall(r'<a id="([A-Za-z0-9_-]+)"></a>', book))
    bad = 0
    alerts = re.split(r"^\s*- alert:\s*", rules, flags=re.M)[1:]
    if not alerts:
        print("no alert found in loadledger.rules.yml")
        return 1
    for block in alerts:
        name = block.split()[0]
        m = re.search(r"runbook_url:\s*['\"]?([^'\"\s]+)", block)
        if not m:
            print(f"{name}: no runbook_url annotation")
            bad += 1
            continue
        url = m.group(1)
        path, _, anchor = url.partition("#")
        if not path.endswith("docs/runbooks.md") or not anchor:
            print(f"{name}: runbook_url {url} is not docs/runbooks.md#<section>")
            bad += 1
        elif anchor not in anchors:
            print(f"{name}: docs/runbooks.md has no section #{anchor} (it has: {', '.join(sorted(anchors))})")
            bad += 1
        else:
            print(f"{name}: docs/runbooks.md#{anchor}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
