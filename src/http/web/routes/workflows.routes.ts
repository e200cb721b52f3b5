/** §4.14 workflows of nodes (session, owner-scoped). */

import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { NODE_TYPES, type WorkflowsService } from '../../../domains/workflows/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser, type SessionRouteConfig } from '../../shared/session.ts';

/**
 * `config` and `position` are objects in requests (§4.14); a JSON-encoded string of an object is
 * accepted too, so a node read back from GET (where both are strings, §2) can be sent back as is.
 */
const objectOrJsonString = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => {
    if (typeof v !== 'string') return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  }, schema);

const NODE_TYPE_ERROR = `Node type must be one of ${NODE_TYPES.join(', ')}`;
const coordinate = z.number({ error: 'Node position x and y must be numbers' }).default(0);

const nodeSchema = z.object(
  {
    type: z.enum(NODE_TYPES, { error: NODE_TYPE_ERROR }),
    config: objectOrJsonString(z.record(z.string(), z.unknown(), { error: 'Node config must be a JSON object' }))
      .optional()
      .describe(
        `Any JSON object, typically with \`label\`; stored JSON-encoded (at most ${LIMITS.workflowNodeConfigMax} characters). Default \`{}\``,
      ),
    position: objectOrJsonString(z.object({ x: coordinate, y: coordinate }, { error: 'Node position must be an object {x, y}' }))
      .optional()
      .describe('`{x, y}` numbers (a missing one is 0; other keys are dropped). Default `{"x":0,"y":0}`'),
  },
  { error: 'Each node must be an object' },
);

const name = z
  .string({ error: 'Name required' })
  .trim()
  .min(1, { error: 'Name required' })
  .max(LIMITS.workflowNameMax, { error: `Name must be at most ${LIMITS.workflowNameMax} characters` });
const description = z
  .string({ error: 'Description must be a string or null' })
  .max(LIMITS.workflowDescriptionMax, { error: `Description must be at most ${LIMITS.workflowDescriptionMax} characters` })
  .nullable();
const nodes = z
  .array(nodeSchema, { error: 'Nodes must be an array' })
  .max(LIMITS.workflowNodesMax, { error: `At most ${LIMITS.workflowNodesMax} nodes per workflow` });

const nodeOut = z.object({
  id: z.string(),
  type: z.enum(NODE_TYPES),
  config: z.string().describe('JSON-encoded object'),
  position: z.string().describe('JSON-encoded `{x,y}`'),
  createdAt: z.string().optional().describe('On the single get only (§2)'),
});
const workflowOut = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  enabled: z.boolean(),
  createdAt: z.string(),
  updatedAt: z.string(),
  nodes: z.array(nodeOut),
});
const params = z.object({ workflowId: z.string() });
const LIMITS_TEXT =
  `Bounds (not shown in the specification): name 1 to ${LIMITS.workflowNameMax} characters after trim, description at most ` +
  `${LIMITS.workflowDescriptionMax}, at most ${LIMITS.workflowNodesMax} nodes, node config at most ${LIMITS.workflowNodeConfigMax} characters JSON-encoded.`;

export const workflowsRoutes = (deps: { workflows: WorkflowsService }): RouteModule<'session'> => {
  const { workflows } = deps;

  return {
    prefix: '/api/workflows',
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['workflows'],
          summary: "The user's workflows",
          description:
            'Newest update first, each with its nodes (by creation time; node `createdAt` is given on the single get only). ' +
            'Without a session: 401 with body `{error, workflows: []}` (§7).',
          response: {
            200: z.object({ workflows: z.array(workflowOut) }),
            401: errorSchema.extend({ workflows: z.array(workflowOut).max(0) }),
          },
        },
        // §7: the 401 of this route carries an empty list (the session scope's guard adds it)
        config: { unauthorizedBody: { workflows: [] } } satisfies SessionRouteConfig,
        handler: async (request) => ({ workflows: await workflows.list(currentUser(request).id) }),
      });
      app.post('', {
        schema: {
          tags: ['workflows'],
          summary: 'Create a workflow',
          description: `\`name\` required (400 \`Name required\`); \`description\` string or null; \`nodes[]\` each with \`type\` (trigger, action, condition, output), \`config\` object, \`position\` object. ${LIMITS_TEXT}`,
          body: jsonBody({ name, description: description.optional(), nodes: nodes.optional() }),
          response: { 201: z.object({ workflow: workflowOut }), ...errorResponses(400, 401) },
        },
        handler: async (request, reply) => {
          const user = currentUser(request);
          return reply.code(201).send({ workflow: await workflows.create(user.id, request.body) });
        },
      });

      app.get('/:workflowId', {
        schema: {
          tags: ['workflows'],
          summary: 'One workflow',
          description: "Nodes by creation time, each with `createdAt`. 404 when it does not exist or is another user's.",
          params,
          response: { 200: z.object({ workflow: workflowOut }), ...errorResponses(401, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return { workflow: await workflows.get(user.id, request.params.workflowId) };
        },
      });

      app.put('/:workflowId', {
        schema: {
          tags: ['workflows'],
          summary: 'Update a workflow',
          description:
            'Optional `name`, `description`, `enabled`, `nodes[]`. When `nodes` is present, every existing node is deleted and replaced ' +
            '(new node ids), in one transaction with the other changes. `updatedAt` moves on every successful PUT. ' +
            `404 when it does not exist or is another user's. ${LIMITS_TEXT}`,
          params,
          body: jsonBody({
            name: name.optional(),
            description: description.optional(),
            enabled: z.boolean({ error: 'Enabled must be a boolean' }).optional(),
            nodes: nodes.optional(),
          }),
          response: { 200: z.object({ workflow: workflowOut }), ...errorResponses(400, 401, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          return { workflow: await workflows.update(user.id, request.params.workflowId, request.body) };
        },
      });

      app.delete('/:workflowId', {
        schema: {
          tags: ['workflows'],
          summary: 'Delete a workflow',
          description: "Deletes the workflow and its nodes. 404 when it does not exist or is another user's.",
          params,
          response: { 200: z.object({ deleted: z.literal(true) }), ...errorResponses(401, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await workflows.remove(user.id, request.params.workflowId);
          return { deleted: true as const };
        },
      });
    },
  };
};
