#!/usr/bin/env bash
# Checks deploy/prometheus: the configuration and the alert rules parse
# (promtool check), and every alert behaves as its unit tests say
# (promtool test rules deploy/prometheus/tests/*.yml). promtool comes with
# Debian's prometheus package (scripts/deps.sh).
set -eu
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null; then
	if [ "${CI:-}" = true ]; then
		echo "check-prometheus: promtool missing under CI (scripts/deps.sh installs prometheus)" >&2
		exit 1
	fi
	echo "check-prometheus: SKIPPED: promtool not installed (apt-get install prometheus)"
	exit 0
fi
# --syntax-only: the configuration names the viewer token file of the
# machine it is installed on (/etc/prometheus/starcloud-viewer.token),
# which this one does not have; everything else is checked in full.
promtool check config --syntax-only deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/rules/*.yml
promtool test rules deploy/prometheus/tests/*.yml
