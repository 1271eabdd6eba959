#!/bin/sh
# set-runbook-base.sh BASE [RULES] - writes the alerting rules (RULES, default loadledger.rules.yml
# next to this script) to stdout with every runbook_url on BASE: each link's part before `#` and the
# `# runbook-base:` line become BASE, the anchors stay (docs/operations.md, "Alerts and dashboard").
# Prometheus cannot read a setting into a rule, so the base is set when the file is installed:
#   set-runbook-base.sh https://wiki.example.com/ops/loadledger-runbooks > /etc/prometheus/rules/loadledger.rules.yml
# BASE is an http(s) URL of letters, digits and - . _ ~ / : % + = only (no `#`, no quote, no space:
# it goes into YAML and sed unescaped). Exit 2 on a bad BASE or a missing file.
set -eu
usage() { echo "usage: set-runbook-base.sh BASE [RULES]  (BASE: https://host/path of [A-Za-z0-9._~/:%+=-])" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
base=$1
rules=${2:-$(dirname "$0")/loadledger.rules.yml}
case $base in
  http://?*|https://?*) ;;
  *) usage ;;
esac
if printf '%s' "$base" | LC_ALL=C grep -q '[^A-Za-z0-9._~/:%+=-]'; then usage; fi
[ -r "$rules" ] || { echo "set-runbook-base.sh: cannot read $rules" >&2; exit 2; }
# '|' cannot occur in BASE (checked above), so it delimits the substitutions
sed -e "s|^\\(# runbook-base: \\).*|\\1$base|" \
    -e "s|^\\([[:space:]]*runbook_url: \\)[^#]*#|\\1$base#|" "$rules"
