#!/usr/bin/env bash
# Throwaway PostgreSQL and Chroma servers on loopback for the skill-bank store tests.
# Sourced by scripts/test.sh:
#   source scripts/services.sh; start_test_services; trap stop_test_services EXIT
# start_test_services exports SKILLRL_TEST_POSTGRES_URL and SKILLRL_TEST_CHROMA_URL (tests marked
# `postgres` / `chroma_server` skip when they are unset). Everything lives in one temp folder
# that stop_test_services removes. PostgreSQL is installed with apt-get if it is missing.

_skillrl_log() { echo "services: $*" >&2; }

_skillrl_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_skillrl_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

_skillrl_pg_bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return 0; fi
  return 1
}

_skillrl_install_postgres() {
  _skillrl_pg_bindir >/dev/null && return 0
  _skillrl_log "installing PostgreSQL (apt-get)"
  # Try without refreshing the package lists first: `apt-get update` is the slow part.
  if ! _skillrl_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1; then
    _skillrl_as_root apt-get update -q >/dev/null
    _skillrl_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
  fi
  _skillrl_pg_bindir >/dev/null
}

# Run a PostgreSQL tool as the `postgres` user when we are root (the server refuses root).
_skillrl_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

_skillrl_start_postgres() {
  _skillrl_install_postgres || { _skillrl_log "cannot install PostgreSQL"; return 1; }
  local bin port data
  bin=$(_skillrl_pg_bindir)
  port=$(_skillrl_free_port)
  data="$SKILLRL_SERVICES_DIR/pg"
  mkdir -p "$data" "$SKILLRL_SERVICES_DIR/pgsock"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$data" "$SKILLRL_SERVICES_DIR/pgsock"
  _skillrl_pg "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null \
    || { _skillrl_log "initdb failed"; return 1; }
  # A test cluster: durability off for speed, loopback only.
  if ! _skillrl_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $SKILLRL_SERVICES_DIR/pgsock -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null; then
    _skillrl_log "PostgreSQL did not start:"; cat "$data/server.log" >&2; return 1
  fi
  SKILLRL_SERVICES_PG_BIN=$bin
  export SKILLRL_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
  _skillrl_log "PostgreSQL on 127.0.0.1:$port"
}

_skillrl_start_chroma() {
  local port
  port=$(_skillrl_free_port)
  if ! command -v chroma >/dev/null 2>&1; then _skillrl_log "the chroma command is missing (pip install chromadb)"; return 1; fi
  ANONYMIZED_TELEMETRY=False chroma run --host 127.0.0.1 --port "$port" \
    --path "$SKILLRL_SERVICES_DIR/chroma" >"$SKILLRL_SERVICES_DIR/chroma.log" 2>&1 &
  SKILLRL_SERVICES_CHROMA_PID=$!
  local url="http://127.0.0.1:$port"
  if ! python3 - "$url" <<'PY'
import sys, time, urllib.request
deadline = time.time() + 90
while time.time() < deadline:
    try:
        with urllib.request.urlopen(sys.argv[1] + "/api/v2/heartbeat", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        time.sleep(0.3)
sys.exit(1)
PY
  then
    _skillrl_log "Chroma did not answer at $url:"; cat "$SKILLRL_SERVICES_DIR/chroma.log" >&2; return 1
  fi
  export SKILLRL_TEST_CHROMA_URL="$url"
  _skillrl_log "Chroma on $url"
}

start_test_services() {
  SKILLRL_SERVICES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skillrl-services.XXXXXX")
  chmod 755 "$SKILLRL_SERVICES_DIR"
  _skillrl_start_postgres && _skillrl_start_chroma
}

stop_test_services() {
  if [ -n "${SKILLRL_SERVICES_CHROMA_PID:-}" ]; then
    kill "$SKILLRL_SERVICES_CHROMA_PID" 2>/dev/null || true
    wait "$SKILLRL_SERVICES_CHROMA_PID" 2>/dev/null || true
    unset SKILLRL_SERVICES_CHROMA_PID
  fi
  if [ -n "${SKILLRL_SERVICES_PG_BIN:-}" ] && [ -d "${SKILLRL_SERVICES_DIR:-}/pg" ]; then
    _skillrl_pg "$SKILLRL_SERVICES_PG_BIN/pg_ctl" -D "$SKILLRL_SERVICES_DIR/pg" -m immediate stop >/dev/null 2>&1 || true
    unset SKILLRL_SERVICES_PG_BIN
  fi
  if [ -n "${SKILLRL_SERVICES_DIR:-}" ]; then
    rm -rf "$SKILLRL_SERVICES_DIR"
    unset SKILLRL_SERVICES_DIR
  fi
  unset SKILLRL_TEST_POSTGRES_URL SKILLRL_TEST_CHROMA_URL
}
