/** Kysely types of migration 004's workflow tables (§2 Workflow and node). */
import type { ColumnType, Generated } from 'kysely';

declare module '../../db/schema.ts' {
  interface DB {
    workflows: WorkflowsTable;
    workflow_nodes: WorkflowNodesTable;
  }
}

export type WorkflowNodeType = 'trigger' | 'action' | 'condition' | 'output';

export interface WorkflowsTable {
  id: Generated<string>;
  user_id: string;
  name: string;
  description: string | null;
  enabled: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface WorkflowNodesTable {
  id: Generated<string>;
  workflow_id: string;
  user_id: string;
  type: WorkflowNodeType;
  /** JSON-encoded object (§2), stored as text */
  config: Generated<string>;
  /** JSON-encoded `{x,y}` (§2), stored as text */
  position: Generated<string>;
  created_at: Generated<Date>;
  seq: ColumnType<number, never, never>;
}
