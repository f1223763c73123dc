#!/usr/bin/env bash
# Start the services the test suite needs and print, on stdout, the `export` lines that tell the
# tests where they are (scripts/test.sh evals them). Progress goes to stderr.
#   - Docker engine (docker.io from Debian; dockerd with default flags) and the sandbox image,
#     built locally by ops/sandbox/build-image.sh (no registry is reachable).
#   - PostgreSQL 15 (Debian's server; it refuses to run as root, so the cluster runs as `postgres`),
#     with a database `evoharness_test` for the Postgres checkpointer and queue tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
STEP_PREFIX=services

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { echo "services: $*" >&2; }

# ---- Docker -------------------------------------------------------------------------------
need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)  # the sandbox image's base
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt-get install ${need_apt[*]}" \
    as_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${need_apt[*]}"
fi
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root sh -c 'nohup dockerd >/var/log/evoharness-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
if docker info >/dev/null 2>&1; then
  if [ -f ops/sandbox/build-image.sh ]; then
    step "sandbox image (ops/sandbox/build-image.sh: debootstrap + docker build the first time, minutes; seconds after)" \
      bash ops/sandbox/build-image.sh
  fi
  echo "export EVOHARNESS_TEST_DOCKER=1"
else
  log "dockerd did not start (see /var/log/evoharness-dockerd.log); Docker tests will fail"
fi

# ---- PostgreSQL ---------------------------------------------------------------------------
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$PGBIN" ]; then
  step "apt-get install postgresql" \
    as_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql"
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
PGVER=$(basename "$(dirname "$PGBIN")")
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -q "^$PGVER main$"; then
  as_root pg_createcluster "$PGVER" main >&2
fi
if ! pg_lsclusters -h | awk -v v="$PGVER" '$1==v && $2=="main"{print $4}' | grep -q online; then
  log "starting postgresql $PGVER"
  as_root pg_ctlcluster "$PGVER" main start >&2
fi
PGPORT=$(pg_lsclusters -h | awk -v v="$PGVER" '$1==v && $2=="main"{print $3}')
for _ in $(seq 30); do
  as_root runuser -u postgres -- psql -p "$PGPORT" -qAtc 'select 1' >/dev/null 2>&1 && break; sleep 1
done
psql_su() { as_root runuser -u postgres -- psql -p "$PGPORT" -qAt "$@"; }
# A password role reached over loopback TCP, as a service would be configured.
if ! psql_su -c "select 1 from pg_roles where rolname='evoharness'" | grep -q 1; then
  psql_su -c "create role evoharness login password 'evoharness'" >/dev/null
fi
if ! psql_su -c "select 1 from pg_database where datname='evoharness_test'" | grep -q 1; then
  as_root runuser -u postgres -- createdb -p "$PGPORT" -O evoharness evoharness_test
fi
psql_su -c "alter database evoharness_test owner to evoharness" >/dev/null  # also for an older database
echo "export EVOHARNESS_TEST_POSTGRES='postgresql://evoharness:evoharness@127.0.0.1:$PGPORT/evoharness_test'"
