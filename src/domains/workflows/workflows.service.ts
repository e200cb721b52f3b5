/**
 * Workflows of nodes (§2 Workflow and node, §4.14). Owner-scoped: everything runs in
 * `db.withUser`, so another user's workflow is indistinguishable from a missing one (404).
 * A node's `config` and `position` are kept as the JSON-encoded strings §2 describes.
 */

import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import { UUID_PATTERN } from '../../lib/ids.ts';
import { workflowsRepo } from './workflows.repo.ts';
import type { WorkflowNodeType } from './workflows.types.ts';

export const NODE_TYPES = ['trigger', 'action', 'condition', 'output'] as const satisfies readonly WorkflowNodeType[];
export const DEFAULT_NODE_CONFIG = '{}';
export const DEFAULT_NODE_POSITION = '{"x":0,"y":0}';

export type NodeInput = {
  type: WorkflowNodeType;
  config?: Record<string, unknown> | undefined;
  position?: { x: number; y: number } | undefined;
};
export type CreateWorkflowInput = { name: string; description?: string | null | undefined; nodes?: NodeInput[] | undefined };
export type UpdateWorkflowInput = {
  name?: string | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
  nodes?: NodeInput[] | undefined;
};

export type WorkflowNode = { id: string; type: WorkflowNodeType; config: string; position: string; createdAt?: string };
export type Workflow = {
  id: string;
  name: string;
  description: string | null;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
  nodes: WorkflowNode[];
};

const WORKFLOW_NOT_FOUND = 'Workflow not found';

function encodeNode(n: NodeInput) {
  const config = n.config === undefined ? DEFAULT_NODE_CONFIG : JSON.stringify(n.config);
  if (config.length > LIMITS.workflowNodeConfigMax) {
    throw badRequest(`Node config too large (at most ${LIMITS.workflowNodeConfigMax} characters JSON-encoded)`);
  }
  const position = n.position === undefined ? DEFAULT_NODE_POSITION : JSON.stringify({ x: n.position.x, y: n.position.y });
  return { type: n.type, config, position };
}

type WorkflowRow = { id: string; name: string; description: string | null; enabled: boolean; created_at: Date; updated_at: Date };
type NodeRow = { id: string; workflow_id: string; type: WorkflowNodeType; config: string; position: string; created_at: Date };

/** §2: a node's `createdAt` appears on the single get only. */
function toWorkflow(w: WorkflowRow, nodes: NodeRow[], withNodeCreatedAt: boolean): Workflow {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    enabled: w.enabled,
    createdAt: w.created_at.toISOString(),
    updatedAt: w.updated_at.toISOString(),
    nodes: nodes.map((n) => ({
      id: n.id,
      type: n.type,
      config: n.config,
      position: n.position,
      ...(withNodeCreatedAt ? { createdAt: n.created_at.toISOString() } : {}),
    })),
  };
}

export function createWorkflowsService(deps: { db: Db }) {
  const { db } = deps;

  const checkId = (id: string) => {
    // a malformed id cannot name a workflow: same 404 as a missing or foreign one
    if (!UUID_PATTERN.test(id)) throw notFound(WORKFLOW_NOT_FOUND);
  };

  return {
    /** §4.14 GET /api/workflows: newest update first, each with its nodes. */
    async list(userId: string): Promise<Workflow[]> {
      return db.withUser(userId, async (trx) => {
        const workflows = await workflowsRepo.listWorkflows(trx);
        const nodes = await workflowsRepo.listNodes(
          trx,
          workflows.map((w) => w.id),
        );
        const byWorkflow = new Map<string, NodeRow[]>();
        for (const n of nodes) {
          const list = byWorkflow.get(n.workflow_id);
          if (list) list.push(n);
          else byWorkflow.set(n.workflow_id, [n]);
        }
        return workflows.map((w) => toWorkflow(w, byWorkflow.get(w.id) ?? [], false));
      });
    },

    /** §4.14 POST /api/workflows: the workflow and its nodes in one transaction. */
    async create(userId: string, input: CreateWorkflowInput): Promise<Workflow> {
      const nodes = (input.nodes ?? []).map(encodeNode);
      return db.withUser(userId, async (trx) => {
        const w = await workflowsRepo.insertWorkflow(trx, userId, { name: input.name, description: input.description ?? null });
        await workflowsRepo.insertNodes(trx, userId, w.id, nodes);
        return toWorkflow(w, await workflowsRepo.listNodes(trx, [w.id]), false);
      });
    },

    /** §4.14 GET /api/workflows/:workflowId: nodes by creation time. */
    async get(userId: string, id: string): Promise<Workflow> {
      checkId(id);
      return db.withUser(userId, async (trx) => {
        const w = await workflowsRepo.getWorkflow(trx, id);
        if (!w) throw notFound(WORKFLOW_NOT_FOUND);
        return toWorkflow(w, await workflowsRepo.listNodes(trx, [id]), true);
      });
    },

    /**
     * §4.14 PUT: updates the given fields; when `nodes` is present every existing node is
     * deleted and replaced, in the same transaction as the update (a failure leaves the old
     * nodes). The row update comes first, so it locks the workflow and two concurrent
     * replacements serialise instead of interleaving their node sets.
     */
    async update(userId: string, id: string, input: UpdateWorkflowInput): Promise<Workflow> {
      checkId(id);
      const nodes = input.nodes?.map(encodeNode);
      const patch: { name?: string; description?: string | null; enabled?: boolean } = {};
      if (input.name !== undefined) patch.name = input.name;
      if (input.description !== undefined) patch.description = input.description;
      if (input.enabled !== undefined) patch.enabled = input.enabled;
      return db.withUser(userId, async (trx) => {
        const w = await workflowsRepo.updateWorkflow(trx, id, patch);
        if (!w) throw notFound(WORKFLOW_NOT_FOUND);
        if (nodes) {
          await workflowsRepo.deleteNodes(trx, id);
          await workflowsRepo.insertNodes(trx, userId, id, nodes);
        }
        return toWorkflow(w, await workflowsRepo.listNodes(trx, [id]), false);
      });
    },

    /** §4.14 DELETE: the nodes go with it (ON DELETE CASCADE). */
    async remove(userId: string, id: string): Promise<void> {
      checkId(id);
      const deleted = await db.withUser(userId, (trx) => workflowsRepo.deleteWorkflow(trx, id));
      if (!deleted) throw notFound(WORKFLOW_NOT_FOUND);
    },
  };
}

export type WorkflowsService = ReturnType<typeof createWorkflowsService>;
