/** Tables added by 006_agents_deployments.sql, declared by module augmentation (schema.ts stays untouched). */
import type { ColumnType, Generated } from 'kysely';
import type { Timestamp } from '../../db/schema.ts';

/** jsonb: read as an object, written as JSON text (pg would send a JS array as a PostgreSQL array). */
type Json = ColumnType<Record<string, unknown>, string | undefined, string>;

export type DeploymentStatus = 'queued' | 'running' | 'succeeded' | 'failed';

export interface DeploymentsTable {
  id: Generated<string>;
  agent_id: string;
  user_id: string;
  action: Generated<'deploy'>;
  status: Generated<DeploymentStatus>;
  attempts: Generated<number>;
  max_attempts: Generated<number>;
  run_after: Generated<Date>;
  locked_by: string | null;
  lease_until: Timestamp | null;
  last_error: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  finished_at: Timestamp | null;
}

export interface AgentCredentialsTable {
  agent_id: string;
  user_id: string;
  gateway_token_enc: string;
  platform_key_hash: Buffer | null;
  platform_key_prefix: string | null;
  created_at: Generated<Date>;
  rotated_at: Timestamp | null;
}

export interface AgentMessagesTable {
  id: Generated<string>;
  agent_id: string;
  user_id: string;
  sender: 'user' | 'agent' | 'system';
  content: string;
  platform: Generated<string>;
  response_ms: number | null;
  failed: Generated<boolean>;
  created_at: Generated<Date>;
}

/** Columns 006 adds to `agents`. */
export interface AgentsDeployColumns {
  gateway_url: string | null;
  external_id: string | null;
  config: Json;
}

declare module '../../db/schema.ts' {
  interface DB {
    deployments: DeploymentsTable;
    agent_credentials: AgentCredentialsTable;
    agent_messages: AgentMessagesTable;
  }
  // 006 adds columns to the base agents table
  interface AgentsTable extends AgentsDeployColumns {}
}
