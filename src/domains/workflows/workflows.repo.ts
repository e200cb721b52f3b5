/**
 * SQL of the workflows domain. Every function takes the RLS-bound transaction of
 * `db.withUser`: workflows are per-user data (§4.14 "owner-scoped"), and the policies of
 * migration 004 hide other users' rows, so "not owned" reads exactly like "not found".
 */
import { sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { WorkflowNodeType } from './workflows.types.ts';

const workflowColumns = ['id', 'name', 'description', 'enabled', 'created_at', 'updated_at'] as const;
const nodeColumns = ['id', 'workflow_id', 'type', 'config', 'position', 'created_at'] as const;

export type NewNode = { type: WorkflowNodeType; config: string; position: string };

export const workflowsRepo = {
  listWorkflows(trx: Tx) {
    return trx.selectFrom('workflows').select(workflowColumns).orderBy('updated_at', 'desc').orderBy('id').execute();
  },

  getWorkflow(trx: Tx, id: string) {
    return trx.selectFrom('workflows').select(workflowColumns).where('id', '=', id).executeTakeFirst();
  },

  /** Nodes of the given workflows, by creation time (ties in insertion order). */
  listNodes(trx: Tx, workflowIds: string[]) {
    if (workflowIds.length === 0) return Promise.resolve([]);
    return trx
      .selectFrom('workflow_nodes')
      .select(nodeColumns)
      .where('workflow_id', 'in', workflowIds)
      .orderBy('created_at')
      .orderBy('seq')
      .execute();
  },

  insertWorkflow(trx: Tx, userId: string, w: { name: string; description: string | null }) {
    return trx
      .insertInto('workflows')
      .values({ user_id: userId, name: w.name, description: w.description })
      .returning(workflowColumns)
      .executeTakeFirstOrThrow();
  },

  /** Updates the given fields and always bumps updated_at; undefined when not found or not owned. */
  updateWorkflow(trx: Tx, id: string, patch: { name?: string; description?: string | null; enabled?: boolean }) {
    return trx
      .updateTable('workflows')
      .set({ ...patch, updated_at: sql`now()` })
      .where('id', '=', id)
      .returning(workflowColumns)
      .executeTakeFirst();
  },

  async deleteWorkflow(trx: Tx, id: string): Promise<boolean> {
    const r = await trx.deleteFrom('workflows').where('id', '=', id).executeTakeFirst();
    return r.numDeletedRows > 0n;
  },

  deleteNodes(trx: Tx, workflowId: string) {
    return trx.deleteFrom('workflow_nodes').where('workflow_id', '=', workflowId).execute();
  },

  /** One multi-row insert: identity values (seq) follow the array order. */
  insertNodes(trx: Tx, userId: string, workflowId: string, nodes: NewNode[]) {
    if (nodes.length === 0) return Promise.resolve([]);
    return trx
      .insertInto('workflow_nodes')
      .values(nodes.map((n) => ({ workflow_id: workflowId, user_id: userId, type: n.type, config: n.config, position: n.position })))
      .execute();
  },
};
