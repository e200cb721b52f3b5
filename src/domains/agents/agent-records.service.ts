/**
 * Agent records and their answers, shared by the backend service (agents.service.ts), its
 * deployment jobs (deployments.service.ts) and the web app's service (agents.web.service.ts): plan
 * limits, the backend and deployment views (§4.7, §4.18), creating an agent with its own
 * credentials, and reading one under the owner's row-level security.
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Secrets } from '../../config/secrets.ts';
import type { Db, Tx } from '../../db/client.ts';
import type { AgentStatus } from '../../db/schema.ts';
import { encryptSecret } from '../../lib/crypto.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { KeyCache } from '../../lib/evicting-cache.ts';
import { type AgentRow, agentsRepo } from './agents.repo.ts';
import { maskChannelSecrets, sealChannelSecrets } from './channel-secrets.rules.ts';
import { newAgentId, newGatewayToken } from './credentials.rules.ts';
import type { JobRow } from './deployments/deployments.repo.ts';
import type { HostingDriver } from './drivers/driver.contract.ts';
import { skillLimitProblem } from './drivers/openclaw-config.rules.ts';
import type { LifecycleLocks } from './lifecycle-locks.service.ts';

export const BACKEND_DEFAULT_PLAN = 'label';

export type AgentsDeps = {
  db: Db;
  config: Pick<Config, 'AGENTS_DOMAIN' | 'BACKEND_URL' | 'configured'>;
  secrets: Pick<Secrets, 'secretsEncryptionKey'>;
  driver: HostingDriver;
  /**
   * Extra environment for an agent's runtime: its model access (docs/agents.md "Model access"),
   * given the platform key this deploy issued, which is the agent's credential there too.
   */
  runtimeEnv?: (agent: AgentRow, credentials: { platformApiKey: string }) => Record<string, string>;
  /**
   * The agent's platform channels as its runtime's own configuration (`channels.*`), for a runtime
   * that runs its channels itself (OpenClaw: docs/channels.md "OpenClaw"); unset for the built-in
   * runtime, whose channels the platform runs.
   */
  runtimeChannels?: (agentId: string) => Promise<Record<string, unknown> | undefined>;
  /** verified platform keys (agent-callbacks.service.ts); a rotated, revoked or deleted key is evicted at once */
  /** verified platform keys with the agent's model (evicted when the key or the model changes) */
  platformKeyCache?: KeyCache<{ model: string }> | undefined;
  /**
   * The model an agent of the user runs for the name asked (docs/agents.md "Model": the seed's
   * names mapped by the owner's plan; 400 MODEL_CANNOT_RUN with the models that can otherwise).
   * Absent (tests of the agents domain alone): the name is stored as asked.
   */
  chooseModel?: (userId: string, asked: string | undefined) => Promise<string>;
  /**
   * Provisioning's `gitInit` (docs/agents.md "A repository from the start"): whether the driver can
   * make an agent's workspace a repository (git as the agent, in its sandbox), and doing it once the
   * deploy made the workspace. Absent: provisioning that asks for it is refused (503 `GIT_UNAVAILABLE`).
   */
  repositories?: { available(agentId: string): boolean; initialise(agentId: string): Promise<void> };
  /** Called after a job is enqueued, so an in-process worker takes it without waiting for its poll. */
  onEnqueue?: () => void;
  /** one lifecycle transition of an agent at a time, shared by the lifecycle, the deployment jobs and the watchdog */
  locks: LifecycleLocks;
};

export type LifecycleAction = 'start' | 'stop' | 'restart';

export const hostingError = () => new AppError('HOSTING_UNAVAILABLE', 'Hosting unavailable');
export const limitReached = (plan: string, limit: number, current: number) =>
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
    // channel secrets never leave the platform in answers (channel-secrets.rules.ts)
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
    gitInit: j.git_init,
    lastError: j.last_error,
    createdAt: j.created_at.toISOString(),
    updatedAt: j.updated_at.toISOString(),
    finishedAt: j.finished_at ? new Date(j.finished_at).toISOString() : null,
  };
}

/** What a new agent record is made of (its owner aside). */
export type NewAgent = {
  id?: string | undefined;
  name: string;
  plan?: string | undefined;
  aiProvider?: string | undefined;
  model?: string | undefined;
  config?: Record<string, unknown> | undefined;
  status: AgentStatus;
};

/**
 * Inserts an agent and its own credentials (a fresh gateway token, encrypted) in the caller's
 * transaction. Both apps use it: the web app creates the record at once when provisioning (§3).
 */
export async function insertAgentRecord(trx: Tx, ctx: { agentsDomain: string; secretsKey: Buffer }, input: NewAgent & { userId: string }) {
  // §2 skill limit of the agent's plan (the table's default plan when none is given)
  const skills = input.config ? skillLimitProblem(input.config, input.plan ?? BACKEND_DEFAULT_PLAN) : undefined;
  if (skills) throw badRequest(skills);
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

/**
 * A lifecycle transaction of the user's agent: the user's row, then the agent's, are locked first,
 * always in that order (as POST /api/deployments and provisioning do), so concurrent lifecycle calls,
 * deployments and provisions of one user queue behind each other instead of deadlocking (40P01).
 * 404 for a missing or foreign agent.
 */
export function lockedAgentTransaction<T>(
  db: Db,
  userId: string,
  agentId: string,
  fn: (trx: Tx, agent: AgentRow) => Promise<T>,
): Promise<T> {
  return db.withUser(userId, async (trx) => {
    if (!(await agentsRepo.lockUser(trx, userId))) throw notFound('Agent not found');
    const agent = await agentsRepo.lockAgent(trx, agentId);
    if (!agent) throw notFound('Agent not found');
    return fn(trx, agent);
  });
}

/** What other domains may ask of agents (the watchdog's WatchdogAgents), without their repository. */
export function createAgentDirectory(db: Db, locks: LifecycleLocks) {
  return {
    findOwn: (userId: string, agentId: string) => findOwnAgent(db, userId, agentId),
    async setGatewayUrl(agentId: string, url: string): Promise<void> {
      await agentsRepo.updateAgent(db.kysely, agentId, { gateway_url: url });
    },
    /**
     * Starts `relaunch` (a repair's restart) only while the agent is still meant to run (status
     * `running`), as one lifecycle transition: after a Stop it does nothing, and a Stop after it
     * stops what it started. Resolves with the relaunch under way (`done`), or undefined when skipped.
     */
    async meantToRun(agentId: string): Promise<boolean> {
      return (await agentsRepo.findAgent(db.kysely, agentId))?.status === 'running';
    },
    relaunchIfRunning(agentId: string, relaunch: () => Promise<void>): Promise<{ done: Promise<void> } | undefined> {
      return locks.run(agentId, async () => {
        const agent = await agentsRepo.findAgent(db.kysely, agentId);
        if (agent?.status !== 'running') return undefined;
        const done = relaunch();
        done.catch(() => {}); // the caller awaits it (and sees its failure) once the lock is let go
        return { done };
      });
    },
  };
}
