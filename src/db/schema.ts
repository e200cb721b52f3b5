/**
 * Kysely table types. One interface per table, named as in SQL; add a table here when a
 * migration adds it. Columns with a database default are `Generated<>`.
 */
import type { ColumnType, Generated } from 'kysely';

export type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface UsersTable {
  id: Generated<string>;
  email: string;
  name: string;
  password_hash: string | null;
  plan: Generated<'solo' | 'collective' | 'label' | 'network'>;
  subscription_status: Generated<string>;
  subscription_id: string | null;
  credits: Generated<number>;
  two_factor_enabled: Generated<boolean>;
  referral_code: string;
  referred_by: string | null;
  wallet_address: string | null;
  runtime_instance_id: string | null;
  idp_sign_in_disabled: Generated<boolean>;
  is_admin: Generated<boolean>;
  email_verified: Generated<boolean>;
  subscription_event_at: Date | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface SessionsTable {
  id: Generated<string>;
  user_id: string;
  token_hash: Buffer;
  expires_at: Timestamp;
  created_at: Generated<Date>;
  user_agent: string | null;
  ip: string | null;
}

export interface SiweNoncesTable {
  nonce: string;
  expires_at: Timestamp;
  created_at: Generated<Date>;
}

export type AgentStatus = 'pending' | 'provisioning' | 'running' | 'active' | 'stopped' | 'suspended' | 'error';

export interface AgentsTable {
  id: string;
  user_id: string;
  name: string;
  model: Generated<string>;
  ai_provider: Generated<string>;
  plan: Generated<string>;
  status: Generated<AgentStatus>;
  subdomain: string;
  url: string;
  runtime_version: string | null;
  verified: Generated<boolean>;
  verification_type: string | null;
  attestation_uid: string | null;
  verified_at: Timestamp | null;
  started_at: Timestamp | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/**
 * All tables. Domains add theirs by module augmentation in their own `<domain>.tables.ts`
 * (`declare module '../../db/schema.ts' { interface DB { my_table: MyTable } }`), so parallel
 * work never edits this file.
 */
export interface DB {
  users: UsersTable;
  sessions: SessionsTable;
  siwe_nonces: SiweNoncesTable;
  agents: AgentsTable;
  admin_setup_tokens: AdminSetupTokensTable;
  billing_events: BillingEventsTable;
}

export interface AdminSetupTokensTable {
  token_hash: Buffer;
  created_at: Generated<Date>;
  expires_at: Date;
}

export interface BillingEventsTable {
  event_id: string;
  type: string;
  user_id: string | null;
  received_at: Generated<Date>;
}
