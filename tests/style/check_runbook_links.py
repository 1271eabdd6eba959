#!/usr/bin/env python3
"""Every alert links a runbook section that exists, by a full link on the file's base (ctest
style.runbook_links and alerts.runbook_base; issue 29 §5, issue 41 item 5).

Reads the rules (packaging/prometheus/loadledger.rules.yml, or RULES: e.g. the output of
packaging/prometheus/set-runbook-base.sh) and fails when the `# runbook-base: URL` line is missing
or not an absolute http(s) URL, when an alert has no `runbook_url` annotation, when a link is not
exactly `<base>#<anchor>`, or when docs/runbooks.md does not define the anchor
(`<a id="name"></a>`). The shipped file's base must be the repository's docs/runbooks.md (it ends
with /docs/runbooks.md). Prints each alert and its link.

Usage: check_runbook_links.py SOURCE_DIR [RULES]. Reads the files only; well under a second.
"""
import os
import re
import sys


def main(src, rules_path=None):
    shipped = rules_path is None
    rules_path = rules_path or os.path.join(src, "packaging", "prometheus", "loadledger.rules.yml")
    rules = open(rules_path, encoding="utf-8").read()
    book = open(os.path.join(src, "docs", "runbooks.md"), encoding="utf-8").read()
    anchors = set(re.findall(r'<a id="([A-Za-z0-9_-]+)"></a>', book))
    m = re.search(r"^# runbook-base: (\S+)\s*$", rules, flags=re.M)
    if not m:
        print(f"{rules_path}: no '# runbook-base: URL' line")
        return 1
    base = m.group(1)
    if not re.fullmatch(r"https?://[A-Za-z0-9._~/:%+=-]+", base):
        print(f"runbook-base {base} is not an absolute http(s) URL without '#'")
        return 1
    if shipped and not base.endswith("/docs/runbooks.md"):
        print(f"the shipped runbook-base {base} is not a link to docs/runbooks.md")
        return 1
    bad = 0
    alerts = re.split(r"^\s*- alert:\s*", rules, flags=re.M)[1:]
    if not alerts:
        print(f"no alert found in {rules_path}")
        return 1
    for block in alerts:
        name = block.split()[0]
        m = re.search(r"runbook_url:\s*['\"]?([^'\"\s]+)", block)
        if not m:
            print(f"{name}: no runbook_url annotation")
            bad += 1
            continue
        url = m.group(1)
        link, _, anchor = url.partition("#")
        if link != base or not anchor:
            print(f"{name}: runbook_url {url} is not {base}#<section>")
            bad += 1
        elif anchor not in anchors:
            print(f"{name}: docs/runbooks.md has no section #{anchor} (it has: {', '.join(sorted(anchors))})")
            bad += 1
        else:
            print(f"{name}: {url}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None))
