/**
 * SQL of the gateway's `agent` plugin: the caller's running agent and its gateway credentials.
 * Owner connection: the gateway runs it for a caller already authenticated (cookie or API key)
 * and filters by that caller's user id.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../../../db/schema.ts';

export const pluginsRepo = {
  async runningAgent(db: Kysely<DB>, userId: string) {
    const r = await sql<{ id: string; gateway_url: string; gateway_token_enc: string }>`
      SELECT a.id, a.gateway_url, c.gateway_token_enc
        FROM agents a JOIN agent_credentials c ON c.agent_id = a.id
       WHERE a.user_id = ${userId} AND a.status IN ('running', 'active') AND a.gateway_url IS NOT NULL
       ORDER BY a.created_at LIMIT 1`.execute(db);
    return r.rows[0];
  },
};
