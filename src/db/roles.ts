/**
 * Least privilege in PostgreSQL (docs/security.md "Database roles").
 *
 * Three roles:
 * - the bootstrap superuser: only the embedded server's start-up uses it, to run `ensureOwnerRole`;
 * - `platform_owner` (LOGIN, not superuser, no BYPASSRLS, no CREATEROLE/CREATEDB): owns the
 *   database, its schema and every table; migrations and the pool connect as it;
 * - `platform_app` (NOLOGIN, no BYPASSRLS): what every request runs as inside `withUser`
 *   (SET LOCAL ROLE); row-level security applies to it, and it may change only the columns
 *   migrate.ts grants it.
 * A data directory made by an earlier version (tables owned by the superuser) is handed over to the
 * owner here, idempotently, on its next start.
 */
import pg from 'pg';
import { APP_ROLE } from './client.ts';

export const OWNER_ROLE = 'platform_owner';
/** A login role whose only right is membership in platform_app: the request pool connects as it. */
export const REQUEST_ROLE = 'platform_request';
/**
 * Arbitrary constant identifying "role set-up" among advisory locks (migrate.ts has its own). Starts
 * on one server run this at once (`npm start -- web` beside `-- backend`): PostgreSQL refuses
 * concurrent ALTER ROLE / GRANT on the same role ("tuple concurrently updated"), so they take turns.
 */
const ROLES_LOCK_KEY = 727_274_002;

/** Rights none of these roles gets: created without them, and the login roles are altered back to that on every start. */
const NO_RIGHTS = 'NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE';
const createRoleIfMissing = (role: string, login: 'LOGIN' | 'NOLOGIN') =>
  `IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${role}') THEN CREATE ROLE ${role} ${login} ${NO_RIGHTS}; END IF;`;

/**
 * Creates or updates the owner and request roles and gives the owner the database; returns the
 * owner's URL, and the request role's URL when `requestPassword` is given.
 */
export async function ensureOwnerRole(superuserUrl: string, ownerPassword: string): Promise<string>;
export async function ensureOwnerRole(
  superuserUrl: string,
  ownerPassword: string,
  requestPassword: string,
): Promise<{ ownerUrl: string; requestUrl: string }>;
export async function ensureOwnerRole(
  superuserUrl: string,
  ownerPassword: string,
  requestPassword?: string,
): Promise<string | { ownerUrl: string; requestUrl: string }> {
  const u = new URL(superuserUrl);
  const database = decodeURIComponent(u.pathname.slice(1));
  const client = new pg.Client({ connectionString: superuserUrl, application_name: 'agent-platform-roles' });
  client.on('error', () => {}); // the server going away fails the running query instead of crashing the process
  await client.connect();
  try {
    // held until client.end() below: the session's end releases it
    await client.query('SELECT pg_advisory_lock($1)', [ROLES_LOCK_KEY]);
    // the login roles' passwords are (re)set each start: they live in DATA_DIR/secrets.json, which the operator may rotate
    const ensureLoginRole = async (role: string, password: string) => {
      const quoted = (await client.query<{ q: string }>('SELECT quote_literal($1) AS q', [password])).rows[0]!.q;
      await client.query(`DO $$ BEGIN ${createRoleIfMissing(role, 'LOGIN')} END $$`);
      await client.query(`ALTER ROLE ${role} LOGIN ${NO_RIGHTS} PASSWORD ${quoted}`);
      await client.query(`GRANT ${APP_ROLE} TO ${role}`);
    };
    await client.query(`DO $$ BEGIN ${createRoleIfMissing(APP_ROLE, 'NOLOGIN')} END $$`);
    await ensureLoginRole(OWNER_ROLE, ownerPassword);
    if (requestPassword !== undefined) await ensureLoginRole(REQUEST_ROLE, requestPassword);
    await client.query(`ALTER DATABASE "${database.replace(/"/g, '""')}" OWNER TO ${OWNER_ROLE}`);
    await client.query(`ALTER SCHEMA public OWNER TO ${OWNER_ROLE}`);
    // everything an earlier version created as the superuser: tables (with their sequences),
    // standalone sequences, views, functions
    await client.query(`DO $$
      DECLARE r record;
      BEGIN
        FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
                   AND pg_get_userbyid(c.relowner) <> '${OWNER_ROLE}'
                   AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))
        LOOP
          EXECUTE format(CASE r.relkind WHEN 'S' THEN 'ALTER SEQUENCE %I OWNER TO ${OWNER_ROLE}'
                                        WHEN 'v' THEN 'ALTER VIEW %I OWNER TO ${OWNER_ROLE}'
                                        WHEN 'm' THEN 'ALTER MATERIALIZED VIEW %I OWNER TO ${OWNER_ROLE}'
                                        ELSE 'ALTER TABLE %I OWNER TO ${OWNER_ROLE}' END, r.relname);
        END LOOP;
        FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> '${OWNER_ROLE}'
        LOOP
          EXECUTE format('ALTER ROUTINE %s OWNER TO ${OWNER_ROLE}', r.sig);
        END LOOP;
      END $$`);
  } finally {
    await client.end();
  }
  const as = (role: string, password: string) => {
    const u = new URL(superuserUrl);
    u.username = role;
    u.password = encodeURIComponent(password);
    return u.toString();
  };
  const ownerUrl = as(OWNER_ROLE, ownerPassword);
  return requestPassword === undefined ? ownerUrl : { ownerUrl, requestUrl: as(REQUEST_ROLE, requestPassword) };
}

/** Whether `url` connects as a superuser or a role that bypasses row-level security. */
export async function connectsAsPrivileged(url: string): Promise<{ role: string; superuser: boolean; bypassRls: boolean }> {
  const client = new pg.Client({ connectionString: url, application_name: 'agent-platform-roles' });
  client.on('error', () => {});
  await client.connect();
  try {
    const r = await client.query<{ role: string; superuser: boolean; bypass: boolean }>(
      'SELECT current_user AS role, rolsuper AS superuser, rolbypassrls AS bypass FROM pg_roles WHERE rolname = current_user',
    );
    const row = r.rows[0]!;
    return { role: row.role, superuser: row.superuser, bypassRls: row.bypass };
  } finally {
    await client.end();
  }
}
