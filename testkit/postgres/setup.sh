#!/usr/bin/env bash
# Makes sure PostgreSQL's server programs (initdb, postgres, psql) are on this machine, for the
# tests that start a throwaway cluster (testkit/src/postgres.rs). Debian's PostgreSQL 15 is
# installed from the distribution's packages when missing; no server is started here (each test
# binary starts and stops its own) and no system cluster is created.
# Idempotent: does nothing when initdb is found on PATH or in `pg_config --bindir`.
set -euo pipefail

found() {
    command -v initdb >/dev/null && return 0
    command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]
}

if found; then
    echo "PostgreSQL server programs found: $( (command -v initdb || echo "$(pg_config --bindir)/initdb") | head -1)"
    exit 0
fi

command -v apt-get >/dev/null || { echo "error: PostgreSQL is missing and apt-get is not available" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "error: PostgreSQL is missing; installing it needs root" >&2; exit 1; }

# Debian's postinst would create and start a system cluster; the tests want neither.
mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/loopbound.conf
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-client-15 >/dev/null

found || { echo "error: PostgreSQL was installed but initdb is still not found" >&2; exit 1; }
echo "PostgreSQL installed: $(pg_config --bindir)"
