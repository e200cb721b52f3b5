/**
 * The backend side of agents (§4.7 backend rows, §4.18 deployments, lifecycle, runtime
 * instances): agent records, plan limits, deployment jobs and what the hosting driver does.
 * The web app reaches these through the backend HTTP API (agents.web.service.ts); the
 * deployment worker (src/workers/deployments.ts) calls `runJob`.
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Secrets } from '../../config/secrets.ts';
import type { Db, Tx } from '../../db/client.ts';
import type { AgentStatus } from '../../db/schema.ts';
import { decryptSecret, encryptSecret, sha256 } from '../../lib/crypto.ts';
import { AppError, notFound } from '../../lib/errors.ts';
import { type AgentRow, agentsRepo, type JobRow } from './agents.repo.ts';
import { maskChannelSecrets, openChannelSecrets, sealChannelSecrets } from './channel-secrets.ts';
import { waitForHealthy } from './container-health.ts';
import { newAgentId, newGatewayToken, newPlatformKey } from './credentials.ts';
import { AgentNotDeployedError, type ContainerStatus, type HostingDriver, HostingUnavailableError } from './drivers/driver.ts';

export const BACKEND_DEFAULT_PLAN = 'label';

export type AgentsDeps = {
  db: Db;
  config: Pick<Config, 'AGENTS_DOMAIN' | 'BACKEND_URL' | 'configured'>;
  secrets: Pick<Secrets, 'secretsEncryptionKey'>;
  driver: HostingDriver;
  /** Extra environment for an agent's runtime (its model provider base URL and key). */
  runtimeEnv?: (agent: AgentRow) => Record<string, string>;
  /** Called after a job is enqueued, so an in-process worker takes it without waiting for its poll. */
  onEnqueue?: () => void;
};

export type LifecycleAction = 'start' | 'stop' | 'restart';

const hostingError = () => new AppError('HOSTING_UNAVAILABLE', 'Hosting unavailable');
const limitReached = (plan: string, limit: number, current: number) =>
  new AppError('AGENT_LIMIT_REACHED', `Agent limit reached for plan ${plan}`, { limit, current });

export function backendLimit(plan: string): number {
  return LIMITS.backendAgentLimits[plan] ?? LIMITS.backendAgentLimits[BACKEND_DEFAULT_PLAN]!;
}

/** §2 Agent, backend shape (plus `name`, `model`, `aiProvider`, `config`: added). */
export function backendAgent(a: AgentRow) {
  return {
    id: a.id,
    name: a.name,
    status: a.status,
    created: a.created_at.toISOString(),
    startedAt: a.started_at ? new Date(a.started_at).toISOString() : null,
    plan: a.plan,
    model: a.model,
    aiProvider: a.ai_provider,
    subdomain: a.subdomain,
    url: a.url,
    gatewayUrl: a.gateway_url,
    runtimeVersion: a.runtime_version,
    verified: a.verified,
    verificationType: a.verification_type,
    attestationUid: a.attestation_uid,
    verifiedAt: a.verified_at ? new Date(a.verified_at).toISOString() : null,
    // channel secrets never leave the platform in answers (channel-secrets.ts)
    config: maskChannelSecrets((a.config ?? {}) as Record<string, unknown>, undefined),
    updatedAt: a.updated_at.toISOString(),
  };
}

export function deploymentView(j: JobRow) {
  return {
    id: j.id,
    agentId: j.agent_id,
    action: j.action,
    status: j.status,
    attempts: j.attempts,
    maxAttempts: j.max_attempts,
    lastError: j.last_error,
    createdAt: j.created_at.toISOString(),
    updatedAt: j.updated_at.toISOString(),
    finishedAt: j.finished_at ? new Date(j.finished_at).toISOString() : null,
  };
}

/**
 * Inserts an agent and its own credentials (a fresh gateway token, encrypted) in the caller's
 * transaction. Both apps use it: the web app creates the record at once when provisioning (§3).
 */
export async function insertAgentRecord(
  trx: Tx,
  ctx: { agentsDomain: string; secretsKey: Buffer },
  input: {
    id?: string | undefined;
    userId: string;
    name: string;
    plan?: string | undefined;
    aiProvider?: string | undefined;
    model?: string | undefined;
    config?: Record<string, unknown> | undefined;
    status: AgentStatus;
  },
) {
  const id = input.id ?? newAgentId();
  const subdomain = `${id}.${ctx.agentsDomain}`;
  const agent = await agentsRepo.insertAgent(trx, {
    id,
    userId: input.userId,
    name: input.name,
    ...(input.plan ? { plan: input.plan } : {}),
    ...(input.aiProvider ? { aiProvider: input.aiProvider } : {}),
    ...(input.model ? { model: input.model } : {}),
    status: input.status,
    subdomain,
    url: `https://${subdomain}`,
    ...(input.config ? { config: sealChannelSecrets(input.config, undefined, ctx.secretsKey) } : {}),
  });
  await agentsRepo.insertCredentials(trx, {
    agentId: id,
    userId: input.userId,
    gatewayTokenEnc: encryptSecret(ctx.secretsKey, newGatewayToken()),
  });
  return agent;
}

/** The user's agent, read under their row-level security; 404 for a missing or foreign one alike. */
export async function findOwnAgent(db: Db, userId: string, id: string): Promise<AgentRow> {
  const a = await db.withUser(userId, (trx) => agentsRepo.findAgent(trx, id));
  if (!a) throw notFound('Agent not found');
  return a;
}

export function createAgentsService(deps: AgentsDeps) {
  const { db, config, driver } = deps;
  const hostingAvailable = () => config.configured.hosting;

  /** Runs a driver call; hosting failures become 500 `Hosting unavailable` (§4.12). */
  async function viaDriver<T>(fn: () => Promise<T>): Promise<T> {
    if (!hostingAvailable()) throw hostingError();
    try {
      return await fn();
    } catch (err) {
      if (err instanceof HostingUnavailableError) throw hostingError();
      throw err;
    }
  }

  const ownAgent = (userId: string, id: string) => findOwnAgent(db, userId, id);

  /** Creates an agent under the plan limit; the user row lock makes count-then-insert atomic. */
  async function createAgent(
    userId: string,
    input: {
      id?: string;
      name: string;
      plan?: string | undefined;
      aiProvider?: string | undefined;
      model?: string | undefined;
      config?: Record<string, unknown> | undefined;
      status: AgentStatus;
    },
  ) {
    const plan = input.plan ?? BACKEND_DEFAULT_PLAN;
    return db.withUser(userId, async (trx) => {
      if (!(await agentsRepo.lockUser(trx, userId))) throw notFound('User not found');
      const current = await agentsRepo.countAgents(trx, userId);
      const limit = backendLimit(plan);
      if (current >= limit) throw limitReached(plan, limit, current);
      return insertAgentRecord(
        trx,
        { agentsDomain: config.AGENTS_DOMAIN, secretsKey: deps.secrets.secretsEncryptionKey },
        { ...input, userId, plan },
      );
    });
  }

  async function enqueue(agent: AgentRow) {
    const job = await db.withUser(agent.user_id, async (trx) => {
      await agentsRepo.updateAgent(trx, agent.id, { status: 'provisioning' });
      return agentsRepo.enqueueDeploy(trx, agent.id, agent.user_id, LIMITS.deploymentMaxAttempts);
    });
    deps.onEnqueue?.();
    return job;
  }

  return {
    hostingAvailable,

    /** §4.7 backend GET /api/agents. */
    async list(userId: string) {
      return (await db.withUser(userId, (trx) => agentsRepo.listAgents(trx, userId))).map((a) => ({
        id: a.id,
        name: a.name,
        status: a.status,
        created: a.created_at.toISOString(),
        subdomain: a.subdomain,
        url: a.url,
      }));
    },

    /** §4.7 backend POST /api/agents: metadata only, status `pending` (§3). */
    async create(userId: string, input: { name: string; plan?: string | undefined; aiProvider?: string | undefined }) {
      const a = await createAgent(userId, { ...input, status: 'pending' });
      return {
        id: a.id,
        name: a.name,
        agentId: a.id,
        status: 'pending' as const,
        subdomain: a.subdomain,
        url: a.url,
        createdAt: a.created_at.toISOString(),
      };
    },

    async get(userId: string, id: string) {
      return backendAgent(await ownAgent(userId, id));
    },

    /** §4.7 backend PUT /api/agents/:id (also takes `name` and `model`: the web app's rename sync). */
    async update(
      userId: string,
      id: string,
      patch: {
        name?: string | undefined;
        plan?: string | undefined;
        aiProvider?: string | undefined;
        model?: string | undefined;
        config?: Record<string, unknown> | undefined;
      },
    ) {
      const a = await db.withUser(userId, async (trx) => {
        // a configuration sent back with masked secrets keeps the stored ones (channel-secrets.ts)
        const stored = patch.config !== undefined ? (await agentsRepo.findAgent(trx, id))?.config : undefined;
        return agentsRepo.updateAgent(trx, id, {
          ...(patch.name !== undefined ? { name: patch.name } : {}),
          ...(patch.plan !== undefined ? { plan: patch.plan } : {}),
          ...(patch.aiProvider !== undefined ? { ai_provider: patch.aiProvider } : {}),
          ...(patch.model !== undefined ? { model: patch.model } : {}),
          ...(patch.config !== undefined
            ? { config: sealChannelSecrets(patch.config, stored as Record<string, unknown> | undefined, deps.secrets.secretsEncryptionKey) }
            : {}),
        });
      });
      if (!a) throw notFound('Agent not found');
      const config = maskChannelSecrets(a.config as Record<string, unknown>, deps.secrets.secretsEncryptionKey);
      return {
        id: a.id,
        plan: a.plan,
        aiProvider: a.ai_provider,
        subdomain: a.subdomain,
        status: a.status,
        message: 'Agent updated',
        config,
        name: a.name,
      };
    },

    /** §4.7 backend DELETE: the record goes at once; driver cleanup is best effort; unknown ids succeed. */
    async remove(userId: string, id: string, log?: (err: unknown) => void) {
      const existed = await db.withUser(userId, (trx) => agentsRepo.deleteAgent(trx, id));
      // only the owner's agent is cleaned up on the hosting side: an id alone never reaches the driver
      if (existed && hostingAvailable()) await driver.delete(id).catch((err) => log?.(err));
      return { id, deleted: true as const };
    },

    /**
     * POST /api/deployments: creates the agent (or takes the existing one the web app created)
     * and enqueues its deploy job. 500 when hosting is unavailable; 402 over the plan limit.
     */
    async requestDeployment(input: {
      userId: string;
      agentId?: string | undefined;
      name: string;
      plan?: string | undefined;
      model?: string | undefined;
      aiProvider?: string | undefined;
      config?: Record<string, unknown> | undefined;
    }) {
      if (!hostingAvailable()) throw hostingError();
      // One transaction that takes the user's row lock first: concurrent requests for one agent (or
      // one user) run one after another, so the second finds the first's agent and joins its active
      // job (the partial unique index on deployments), instead of two transactions locking the user
      // row and the agent row in opposite orders (a deadlock, answered 500).
      const { agent, job } = await db
        .withUser(input.userId, async (trx) => {
          if (!(await agentsRepo.lockUser(trx, input.userId))) throw notFound('User not found');
          const existing = input.agentId ? await agentsRepo.findAgent(trx, input.agentId) : undefined;
          let row: AgentRow;
          if (existing) {
            const plan = input.plan ?? existing.plan;
            const others = await agentsRepo.countAgents(trx, input.userId, existing.id);
            const limit = backendLimit(plan);
            if (others >= limit) throw limitReached(plan, limit, others);
            row =
              (await agentsRepo.updateAgent(trx, existing.id, {
                plan,
                status: 'provisioning',
                ...(input.model ? { model: input.model } : {}),
                ...(input.aiProvider ? { ai_provider: input.aiProvider } : {}),
                ...(input.config
                  ? {
                      config: sealChannelSecrets(
                        input.config,
                        existing.config as Record<string, unknown>,
                        deps.secrets.secretsEncryptionKey,
                      ),
                    }
                  : {}),
              })) ?? existing;
          } else {
            const plan = input.plan ?? BACKEND_DEFAULT_PLAN;
            const current = await agentsRepo.countAgents(trx, input.userId);
            const limit = backendLimit(plan);
            if (current >= limit) throw limitReached(plan, limit, current);
            row = await insertAgentRecord(
              trx,
              { agentsDomain: config.AGENTS_DOMAIN, secretsKey: deps.secrets.secretsEncryptionKey },
              {
                ...(input.agentId ? { id: input.agentId } : {}),
                userId: input.userId,
                name: input.name,
                plan,
                model: input.model,
                aiProvider: input.aiProvider,
                config: input.config,
                status: 'provisioning',
              },
            );
          }
          return { agent: row, job: await agentsRepo.enqueueDeploy(trx, row.id, input.userId, LIMITS.deploymentMaxAttempts) };
        })
        .catch((err: unknown) => {
          // `agentId` names an agent of another user (invisible under row-level security, so the insert
          // collides with it): answered exactly like a missing agent, never as a 500 that reveals it
          if (input.agentId && (err as { code?: string }).code === '23505') throw notFound('Agent not found');
          throw err;
        });
      deps.onEnqueue?.();
      return { deployment: deploymentView(job), agent: backendAgent({ ...agent, status: 'provisioning' }) };
    },

    async getDeployment(userId: string, jobId: string) {
      const j = await db.withUser(userId, (trx) => agentsRepo.getJob(trx, jobId));
      if (!j) throw notFound('Deployment not found');
      return deploymentView(j);
    },

    /**
     * Per-agent lifecycle (§4.18, designed): `start` resumes a stopped unit or deploys one that
     * does not exist; `stop` suspends; `restart` restarts (deploying when the unit is gone).
     */
    async lifecycle(userId: string, id: string, action: LifecycleAction) {
      const agent = await ownAgent(userId, id);
      return viaDriver(async () => {
        const unit = (await driver.status(id)).status;
        const gone = unit === 'not_found' || unit === 'error';
        if (action === 'stop') {
          if (!gone) await driver.suspend(id);
          await db.withUser(userId, (trx) => agentsRepo.updateAgent(trx, id, { status: 'stopped' }));
          return { id, action, status: 'stopped' as AgentStatus, deployment: null };
        }
        if (gone || agent.status === 'pending' || agent.status === 'error') {
          const job = await enqueue(agent);
          return { id, action, status: 'provisioning' as AgentStatus, deployment: deploymentView(job) };
        }
        try {
          if (action === 'start') await driver.resume(id);
          else await driver.restart(id);
        } catch (err) {
          // the driver has no unit or launch spec (e.g. a local process gone with a platform restart): deploy again
          if (!(err instanceof AgentNotDeployedError)) throw err;
          const job = await enqueue(agent);
          return { id, action, status: 'provisioning' as AgentStatus, deployment: deploymentView(job) };
        }
        await db.withUser(userId, (trx) => agentsRepo.updateAgent(trx, id, { status: 'running', started_at: new Date() }));
        return { id, action, status: 'running' as AgentStatus, deployment: null };
      });
    },

    async logs(userId: string, id: string, options: { limit: number; level?: string | undefined }) {
      await ownAgent(userId, id);
      const lines = await viaDriver(() => driver.logs(id, { limit: options.limit, ...(options.level ? { level: options.level } : {}) }));
      return lines.slice(-options.limit);
    },

    async stats(userId: string, id: string) {
      await ownAgent(userId, id);
      return viaDriver(() => driver.stats(id));
    },

    /** GET /api/runtime-instances: agents with what the hosting driver says about each. */
    async runtimeInstances(filter: { userId?: string | undefined; limit: number }) {
      const rows = filter.userId
        ? (await db.withUser(filter.userId, (trx) => agentsRepo.listAgents(trx, filter.userId!))).slice(0, filter.limit)
        : await agentsRepo.listAllAgents(db.kysely, { limit: filter.limit });
      return Promise.all(
        rows.map(async (a) => {
          let containerStatus: ContainerStatus | null = null;
          if (hostingAvailable())
            containerStatus = await driver.status(a.id).then(
              (s) => s.status,
              () => null,
            );
          return {
            agentId: a.id,
            userId: a.user_id,
            name: a.name,
            status: a.status,
            containerStatus,
            driver: driver.kind,
            url: a.url,
            gatewayUrl: a.gateway_url,
            externalId: a.external_id,
            startedAt: a.started_at ? new Date(a.started_at).toISOString() : null,
          };
        }),
      );
    },

    /**
     * Runs one deploy job the worker holds: rotates the platform key, deploys with the agent's own
     * credentials, waits for health (§4.12: poll every 2 s, 60 s overall) and marks it running.
     * Throws on failure; the worker decides between retry and `error`.
     */
    async runJob(job: { agent_id: string; user_id: string }, signal?: AbortSignal) {
      const agent = await agentsRepo.findAgent(db.kysely, job.agent_id);
      if (!agent) return { skipped: true as const };
      if (!hostingAvailable()) throw new HostingUnavailableError('hosting driver not configured');
      const creds = await agentsRepo.getCredentials(db.kysely, agent.id);
      if (!creds) throw new Error(`agent ${agent.id} has no credentials`);
      const platformKey = newPlatformKey();
      await agentsRepo.setPlatformKey(db.kysely, agent.id, platformKey.hash, platformKey.prefix);
      const deployment = await driver.deploy({
        agentId: agent.id,
        userId: agent.user_id,
        plan: agent.plan,
        gatewayToken: decryptSecret(deps.secrets.secretsEncryptionKey, creds.gateway_token_enc),
        platformApiKey: platformKey.key,
        backendUrl: config.BACKEND_URL,
        // the agent itself gets its channel secrets in clear (channel-secrets.ts)
        config: {
          ...openChannelSecrets((agent.config ?? {}) as Record<string, unknown>, deps.secrets.secretsEncryptionKey),
          model: agent.model,
          aiProvider: agent.ai_provider,
          name: agent.name,
        },
        env: deps.runtimeEnv?.(agent) ?? {},
      });
      // §4.12: poll /healthz every 2 s, 60 s overall. Silent after that but alive is §3 `starting`:
      // the agent counts as running and the watchdog takes over; a dead unit fails the attempt.
      let health: ContainerStatus = deployment.status;
      if (health !== 'healthy') {
        health = (await waitForHealthy(deployment.url, signal ? { signal } : {})) ? 'healthy' : (await driver.status(agent.id)).status;
        if (signal?.aborted) throw signal.reason ?? new Error('aborted');
        if (health === 'error' || health === 'stopped' || health === 'not_found') throw new Error(`agent failed to start (${health})`);
      }
      await agentsRepo.updateAgent(db.kysely, agent.id, {
        status: 'running',
        gateway_url: deployment.url,
        external_id: deployment.externalId,
        started_at: new Date(),
      });
      return { skipped: false as const, health };
    },

    /** After retries ran out: the agent shows `error` (§3 provisioning → error). */
    async markFailed(agentId: string) {
      await agentsRepo.updateAgent(db.kysely, agentId, { status: 'error' });
    },

    /**
     * Start-up reconciliation: agents the database says are running but whose unit is gone (the
     * local driver stopped its processes with the platform) are deployed again. The partial
     * unique index keeps N replicas starting together from enqueueing twice.
     */
    async reconcile(log?: (msg: string, extra: Record<string, unknown>) => void) {
      if (!hostingAvailable()) return 0;
      const running = await agentsRepo.listAllAgents(db.kysely, { status: ['running', 'provisioning'], limit: 10_000 });
      let n = 0;
      for (const a of running) {
        const s = await driver.status(a.id).then(
          (r) => r.status,
          () => 'error' as const,
        );
        if (s === 'healthy' || s === 'starting' || s === 'running') continue;
        await agentsRepo.enqueueDeploy(db.kysely, a.id, a.user_id, LIMITS.deploymentMaxAttempts);
        // truthful until the job has it healthy again
        await agentsRepo.updateAgent(db.kysely, a.id, { status: 'provisioning' });
        n++;
        log?.('agent redeploy queued', { agentId: a.id, was: s });
      }
      if (n > 0) deps.onEnqueue?.();
      return n;
    },

    /**
     * Stores chat messages an agent reports with its own platform key (the runtime calls this
     * after each answered turn). The key decides agent and owner; nothing in the body can name
     * another agent. Returns null for an unknown key.
     */
    async recordAgentMessages(
      key: string,
      messages: {
        sender: 'user' | 'agent' | 'system';
        content: string;
        platform?: string | undefined;
        responseMs?: number | undefined;
        failed?: boolean | undefined;
      }[],
    ): Promise<{ agentId: string; stored: number } | null> {
      if (!key || key.length > 200) return null;
      const owner = await agentsRepo.findByPlatformKeyHash(db.kysely, sha256(key));
      if (!owner) return null;
      await db.withUser(owner.user_id, async (trx) => {
        for (const m of messages) {
          await agentsRepo.insertMessage(trx, {
            agentId: owner.agent_id,
            userId: owner.user_id,
            sender: m.sender,
            content: m.content,
            ...(m.platform ? { platform: m.platform } : {}),
            responseMs: m.responseMs ?? null,
            failed: m.failed ?? false,
          });
        }
      });
      return { agentId: owner.agent_id, stored: messages.length };
    },

    /** The agent a per-agent platform key belongs to, or null (for routes agents call back). */
    async verifyPlatformKey(key: string): Promise<{ agentId: string; userId: string } | null> {
      if (!key || key.length > 200) return null;
      const r = await agentsRepo.findByPlatformKeyHash(db.kysely, sha256(key));
      return r ? { agentId: r.agent_id, userId: r.user_id } : null;
    },
  };
}

export type AgentsService = ReturnType<typeof createAgentsService>;
