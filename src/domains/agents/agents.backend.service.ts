/**
 * The backend side of agents (§4.7 backend rows, lifecycle, logs, stats, runtime instances). The
 * web app reaches these through the backend HTTP API (agents.web.service.ts). Records and views
 * are agent-records.service.ts. Two services of the domain are built beside this one and passed
 * on their own: deployment jobs and reconciliation (deployments/deployments.service.ts, given to
 * the worker and the deployment routes) and what agents call back with their own key
 * (agent-callbacks.service.ts, given to its route module).
 */
import { LIMITS } from '../../config/limits.ts';
import type { AgentStatus } from '../../db/schema.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import {
  type AgentsDeps,
  BACKEND_DEFAULT_PLAN,
  backendAgent,
  backendLimit,
  deploymentView,
  findOwnAgent,
  hostingError,
  insertAgentRecord,
  type LifecycleAction,
  limitReached,
  lockedAgentTransaction,
  type NewAgent,
} from './agent-records.service.ts';
import { agentsRepo } from './agents.repo.ts';
import { maskChannelSecrets, sealChannelSecrets } from './channel-secrets.rules.ts';
import { configuredModel, SEED_MODEL_NAMES, withConfiguredModel } from './configured-model.rules.ts';
import { deploymentsRepo } from './deployments/deployments.repo.ts';
import { AgentNotDeployedError, type ContainerStatus, HostingUnavailableError } from './drivers/driver.contract.ts';
import { skillLimitProblem } from './drivers/openclaw-config.rules.ts';

export type { AgentsDeps, LifecycleAction } from './agent-records.service.ts';

/** Driver states of a unit that runs. */
const UP = new Set<ContainerStatus>(['healthy', 'starting', 'running']);

export function createAgentsService(deps: AgentsDeps) {
  const { db, config, driver, locks } = deps;
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
  async function createAgent(userId: string, input: NewAgent) {
    const plan = input.plan ?? BACKEND_DEFAULT_PLAN;
    // one routable model from the start (docs/agents.md "Model"), never the column's seed default
    const model = deps.chooseModel ? await deps.chooseModel(userId, input.model) : input.model;
    return db.withUser(userId, async (trx) => {
      if (!(await agentsRepo.lockUser(trx, userId))) throw notFound('User not found');
      const current = await agentsRepo.countAgents(trx, userId);
      const limit = backendLimit(plan);
      if (current >= limit) throw limitReached(plan, limit, current);
      return insertAgentRecord(
        trx,
        { agentsDomain: config.AGENTS_DOMAIN, secretsKey: deps.secrets.secretsEncryptionKey },
        { ...input, ...(model ? { model } : {}), userId, plan },
      );
    });
  }

  /**
   * Start and Restart: the agent is deployed again from its stored record (configuration, model,
   * plan; a fresh platform key), by a deployment job; one already queued or running is joined.
   */
  async function redeploy(userId: string, id: string) {
    // the record only: the job's deploy is the transition that reaches the driver
    const job = await lockedAgentTransaction(db, userId, id, async (trx) => {
      await agentsRepo.updateAgent(trx, id, { status: 'provisioning' });
      return deploymentsRepo.enqueueDeploy(trx, id, userId, LIMITS.deploymentMaxAttempts);
    });
    deps.onEnqueue?.();
    return job;
  }

  /**
   * Stop: `stopped` in the record, the platform key revoked, and the driver told to end the unit,
   * as one transition; then the wait until it has (docs/agents.md "Stop, suspend and restart").
   */
  async function stop(userId: string, id: string) {
    const stopping = await locks.run(id, async () => {
      await lockedAgentTransaction(db, userId, id, async (trx) => {
        await agentsRepo.updateAgent(trx, id, { status: 'stopped' });
        await agentsRepo.revokePlatformKey(trx, id);
      });
      deps.platformKeyCache?.evictKey(id);
      // every process of the agent ends (the local driver: SIGTERM, then SIGKILL after its grace
      // period); a driver without a separate stop (Render) suspends the service, which runs nothing
      const done = driver.stop ? driver.stop(id) : driver.suspend(id);
      done.catch(() => {}); // awaited below, once the lock is let go
      return { done };
    });
    await stopping.done.catch((err: unknown) => {
      // nothing deployed: nothing to end
      if (!(err instanceof AgentNotDeployedError)) throw err;
    });
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

    /**
     * Start-up: agents provisioned before models were checked still name one of the seed's names
     * (`claude-opus-4-6`, `gpt-4`, `custom`: §4.7), which no provider routes. Each gets the model
     * that name maps to for its owner's plan, once, so what every page shows is what runs
     * (docs/agents.md "Model"). One that cannot be mapped keeps its name and is logged.
     */
    async settleSeedModels(log: Logger): Promise<number> {
      if (!deps.chooseModel) return 0;
      let n = 0;
      for (const a of await agentsRepo.agentsWithModels(db.kysely, SEED_MODEL_NAMES)) {
        const model = await deps.chooseModel(a.user_id, a.model).catch((err: Error) => {
          log.warn({ agentId: a.id, model: a.model, reason: err.message }, 'agent model not settled');
          return undefined;
        });
        if (!model || model === a.model) continue;
        await agentsRepo.updateAgent(db.kysely, a.id, { model });
        deps.platformKeyCache?.evictKey(a.id);
        n++;
      }
      if (n > 0) log.info({ agents: n }, 'agents given the model their provisioning name maps to');
      return n;
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
      // the model, whether named by itself or as the configuration's agents.defaults.model (the
      // Configuration tab), is the record's one model: checked against what can run, and the
      // configuration made to say the same (docs/agents.md "Model")
      const asked = patch.model ?? configuredModel(patch.config);
      const model = asked !== undefined && deps.chooseModel ? await deps.chooseModel(userId, asked) : asked;
      const newConfig = patch.config !== undefined && model !== undefined ? withConfiguredModel(patch.config, model) : patch.config;
      const a = await db.withUser(userId, async (trx) => {
        // a configuration sent back with masked secrets keeps the stored ones (channel-secrets.rules.ts)
        const existing = newConfig !== undefined ? await agentsRepo.findAgent(trx, id) : undefined;
        const stored = existing?.config;
        // §2 skill limit of the plan the agent will be on: more skills than it allows is refused, not stored
        const skills = newConfig && existing ? skillLimitProblem(newConfig, patch.plan ?? existing.plan) : undefined;
        if (skills) throw badRequest(skills);
        return agentsRepo.updateAgent(trx, id, {
          ...(patch.name !== undefined ? { name: patch.name } : {}),
          ...(patch.plan !== undefined ? { plan: patch.plan } : {}),
          ...(patch.aiProvider !== undefined ? { ai_provider: patch.aiProvider } : {}),
          ...(model !== undefined ? { model } : {}),
          ...(newConfig !== undefined
            ? { config: sealChannelSecrets(newConfig, stored as Record<string, unknown> | undefined, deps.secrets.secretsEncryptionKey) }
            : {}),
        });
      });
      if (!a) throw notFound('Agent not found');
      // the model gateway reads the agent's model with its platform key: the next call uses the new one
      if (model !== undefined) deps.platformKeyCache?.evictKey(id);
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

    /**
     * §4.7 backend DELETE: the record goes at once (its credentials with it, so its platform key
     * stops working everywhere); driver cleanup is best effort; unknown ids succeed.
     */
    async remove(userId: string, id: string, log?: (err: unknown) => void) {
      // a transition like the others: a deployment that started before it is deleted with the unit,
      // one after it finds no agent (never a process for a deleted agent)
      const removing = await locks.run(id, async () => {
        const existed = await db.withUser(userId, (trx) => agentsRepo.deleteAgent(trx, id));
        if (existed) deps.platformKeyCache?.evictKey(id);
        // only the owner's agent is cleaned up on the hosting side: an id alone never reaches the driver
        if (!existed || !hostingAvailable()) return undefined;
        const done = driver.delete(id);
        done.catch(() => {}); // awaited below
        return { done };
      });
      await removing?.done.catch((err) => log?.(err));
      return { id, deleted: true as const };
    },

    /**
     * Per-agent lifecycle (§4.18, designed; docs/agents.md "Stop, suspend and restart"): `stop` ends
     * every process of the agent and revokes its platform key (its credential for callbacks and the AI
     * gateway, docs/agents.md "Model access"); `restart` deploys it again from its stored record (so a
     * configuration saved since applies), with a fresh key; `start` does the same unless it already
     * runs. Calls on one agent are transitions in arrival order (lifecycle-locks.service.ts).
     */
    async lifecycle(userId: string, id: string, action: LifecycleAction) {
      const agent = await ownAgent(userId, id);
      return viaDriver(async () => {
        if (action === 'stop') {
          await stop(userId, id);
          return { id, action, status: 'stopped' as AgentStatus, deployment: null };
        }
        if (action === 'start' && agent.status === 'running' && UP.has((await driver.status(id)).status)) {
          return { id, action, status: 'running' as AgentStatus, deployment: null };
        }
        const job = await redeploy(userId, id);
        return { id, action, status: 'provisioning' as AgentStatus, deployment: deploymentView(job) };
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
  };
}

export type AgentsService = ReturnType<typeof createAgentsService>;
