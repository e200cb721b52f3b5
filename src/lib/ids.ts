/** Id formats shared by routes and services (one definition, not one per file). */

/** A UUID as PostgreSQL's gen_random_uuid() makes them (users, keys, workflows, jobs), any case. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
