#!/bin/sh
# Starts PostgreSQL as the user postgres (after making its directories its own, whatever volume
# or bind mount they are), initialising the data directory on the first start.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=acs}"
: "${POSTGRES_DB:=acs}"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown postgres:postgres "$PGDATA" /run/postgresql
  # PGDATA may be a directory below the mount (a fresh volume can hold lost+found), and a
  # volume's root may be root's and closed to others (a hostPath claim's is 0750): the way down
  # to PGDATA is made postgres's too.
  parent=$(dirname "$PGDATA")
  if [ "$parent" != / ]; then chown postgres:postgres "$parent"; fi
  chmod 0700 "$PGDATA"
  chmod 2775 /run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "acs-postgres: the data directory is empty and POSTGRES_PASSWORD is not set: set it to the password of $POSTGRES_USER" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  # Clients on other hosts (with POSTGRES_LISTEN_ADDRESSES) sign in with the password too.
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    printf 'CREATE DATABASE "%s";\n' "$POSTGRES_DB" | postgres --single -j -D "$PGDATA" postgres >/dev/null
  fi
  echo "acs-postgres: initialised $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi

exec postgres -D "$PGDATA" -c listen_addresses="${POSTGRES_LISTEN_ADDRESSES:-}" -c unix_socket_directories=/run/postgresql "$@"
