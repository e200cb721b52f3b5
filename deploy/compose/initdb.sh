#!/bin/sh
# Run once by the postgres image on an empty data directory: the roles of docs/security.md
# "Database roles". platform_owner owns the database and runs the migrations; platform_request
# serves request transactions under row-level security; neither is a superuser.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v owner_password="$PLATFORM_OWNER_PASSWORD" -v request_password="$PLATFORM_REQUEST_PASSWORD" <<'SQL'
CREATE ROLE platform_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
CREATE ROLE platform_owner LOGIN PASSWORD :'owner_password' NOSUPERUSER NOBYPASSRLS IN ROLE platform_app;
CREATE ROLE platform_request LOGIN PASSWORD :'request_password' NOSUPERUSER NOBYPASSRLS IN ROLE platform_app;
ALTER DATABASE :"DBNAME" OWNER TO platform_owner;
ALTER SCHEMA public OWNER TO platform_owner;
SQL
