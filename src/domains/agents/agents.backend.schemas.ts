/**
 * The zod schemas of the backend agent API (src/http/backend/routes/agents.backend.routes.ts; §4.7
 * backend rows, §4.18 deployments and runtime instances): what each operation takes and answers.
 */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';
import { agentName, configObject, gitInitField } from './agents.schemas.ts';

const planName = z
  .string({ error: 'plan must be a string' })
  .trim()
  .min(1, { error: 'plan must not be empty' })
  .max(32, { error: 'plan too long' })
  .regex(/^[a-z_]+$/, { error: 'Invalid plan' });
const aiProvider = z.string({ error: 'aiProvider must be a string' }).trim().min(1).max(64, { error: 'aiProvider too long' });
const model = z.string({ error: 'model must be a string' }).trim().min(1).max(200, { error: 'model too long' });
const userIdField = z
  .string({ error: 'userId must be a string' })
  .max(64)
  .optional()
  .describe('Acting user when header `x-user-id` is absent');
export const agentIdParam = z.object({ id: z.string().min(1).max(200) });

export const agentListItem = z.object({
  id: z.string(),
  status: z.string(),
  created: z.string(),
  subdomain: z.string(),
  url: z.string(),
  name: z.string(),
});
/** One agent as the backend answers it (the routes add the watchdog's state, which lives in another domain). */
export const agentRecord = z.object({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  created: z.string(),
  startedAt: z.string().nullable(),
  plan: z.string(),
  model: z.string(),
  aiProvider: z.string(),
  subdomain: z.string(),
  url: z.string(),
  gatewayUrl: z.string().nullable().describe('Where the hosting driver says the gateway answers (added)'),
  runtimeVersion: z.string().nullable(),
  verified: z.boolean(),
  verificationType: z.string().nullable(),
  attestationUid: z.string().nullable(),
  verifiedAt: z.string().nullable(),
  config: z.record(z.string(), z.unknown()),
  updatedAt: z.string(),
});
export const deploymentJob = z.object({
  id: z.string(),
  agentId: z.string(),
  action: z.string(),
  status: z.enum(['queued', 'running', 'succeeded', 'failed']),
  attempts: z.number(),
  maxAttempts: z.number(),
  gitInit: z.boolean().describe('the deploy also makes the workspace a git repository with a first commit (provisioning asked for it)'),
  lastError: z
    .string()
    .nullable()
    .describe('why the last attempt failed; on a succeeded job that asked for `gitInit`, why the workspace could not be made a repository'),
  createdAt: z.string(),
  updatedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export const driverLogLine = z.object({ timestamp: z.string(), level: z.string(), message: z.string(), source: z.string() });
export const driverStats = z.object({
  cpu: z.number(),
  memory: z.number(),
  memoryPercent: z.number(),
  network: z.object({ rxBytes: z.number(), txBytes: z.number() }),
  uptime: z.number(),
  pids: z.number(),
  status: z.string(),
  messagesProcessed: z.number().optional(),
  messagesFailed: z.number().optional(),
  averageResponseTimeMs: z.number().optional(),
});

const BODY = { error: 'Request body must be a JSON object' };

/** POST /api/agents */
export const createAgentBody = z.object(
  {
    name: agentName,
    userId: userIdField,
    config: z
      .object({ plan: planName.optional(), aiProvider: aiProvider.optional() }, { error: 'config must be an object' })
      .loose()
      .optional(),
  },
  BODY,
);
export const createdAgent = z.object({
  id: z.string(),
  name: z.string(),
  agentId: z.string(),
  status: z.literal('pending'),
  subdomain: z.string(),
  url: z.string(),
  createdAt: z.string(),
});

/** PUT /api/agents/:id */
export const updateAgentBody = z.object(
  {
    plan: planName.optional(),
    aiProvider: aiProvider.optional(),
    config: configObject.optional(),
    name: agentName.optional(),
    model: model.optional(),
  },
  BODY,
);
export const updatedAgent = z.object({
  id: z.string(),
  plan: z.string(),
  aiProvider: z.string(),
  subdomain: z.string(),
  status: z.string(),
  message: z.string(),
  name: z.string(),
  config: z.record(z.string(), z.unknown()),
});

/** GET /api/agents/:id/logs */
export const driverLogsQuery = z.object({
  limit: z.coerce
    .number({ error: 'limit must be a number' })
    .int()
    .min(1, { error: 'limit must be at least 1' })
    .max(LIMITS.agentListMax)
    .default(LIMITS.agentListDefault),
  level: z.enum(['debug', 'info', 'warn', 'error'], { error: 'level must be debug, info, warn or error' }).optional(),
});

/** POST /api/deployments */
export const deploymentBody = z.object(
  {
    userId: userIdField,
    agentId: z
      .string({ error: 'agentId must be a string' })
      .regex(/^[a-z0-9][a-z0-9-]{2,62}$/, { error: 'Invalid agentId' })
      .optional(),
    name: agentName,
    plan: planName.optional(),
    limitPlan: planName
      .optional()
      .describe("the plan whose agent limit applies (default: `plan`); the web app sends the account's plan for admins"),
    model: model.optional(),
    aiProvider: aiProvider.optional(),
    config: configObject.optional(),
    gitInit: gitInitField,
  },
  BODY,
);

/** GET /api/runtime-instances */
export const instancesQuery = z.object({
  limit: z.coerce.number({ error: 'limit must be a number' }).int().min(1).max(LIMITS.agentListMax).default(LIMITS.agentListDefault),
});
export const runtimeInstances = z.object({
  instances: z.array(
    z.object({
      agentId: z.string(),
      userId: z.string(),
      name: z.string(),
      status: z.string(),
      containerStatus: z.string().nullable(),
      driver: z.string(),
      url: z.string(),
      gatewayUrl: z.string().nullable(),
      externalId: z.string().nullable(),
      startedAt: z.string().nullable(),
    }),
  ),
  count: z.number(),
});
