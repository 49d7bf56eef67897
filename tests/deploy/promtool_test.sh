#!/bin/sh
# promtool check config, check rules and test rules on deploy/prometheus (every alert fires in
# its unit test; see deploy_static_test for that coverage check).
set -eu
deploy="$1/deploy/prometheus"
if ! command -v promtool > /dev/null; then
  echo "promtool not found: install Debian's prometheus package (make deps does)" >&2
  exit 1
fi
promtool check config "$deploy/prometheus.yml"
promtool check rules "$deploy"/rules/*.yml
cd "$deploy/tests" && promtool test rules alerts_test.yml token_collapse_test.yml
