/**
 * The web side of agents (§4.7 web rows, §3 Agent web provisioning). Records are read and
 * written here under the session user's row-level security; what needs the hosting driver
 * (deploy, logs, stats, lifecycle, delete) goes to the backend over HTTP with INTERNAL_API_KEY.
 * The rules it applies (plans, limits, the web shape) are web-provisioning.service.ts; records, deployment jobs and
 * callbacks are agent-records.service.ts, deployments.service.ts and agent-callbacks.service.ts.
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Secrets } from '../../config/secrets.ts';
import type { Db } from '../../db/client.ts';
import { codeForBody } from '../../lib/error-codes.ts';
import { AppError, notFound } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { agentMessagesRepo } from './agent-messages.repo.ts';
import { findOwnAgent, insertAgentRecord, type LifecycleAction } from './agent-records.service.ts';
import { type AgentRow, agentsRepo } from './agents.repo.ts';
import { type BackendClient, type BackendResponse, BackendUnreachableError } from './backend.client.ts';
import { maskChannelSecrets } from './channel-secrets.rules.ts';
import { configuredModel, withConfiguredModel } from './configured-model.rules.ts';
import { agentLimitReached, agentPlan, DEFAULT_MODEL, providerFor, webAgent, webLimit } from './web-provisioning.service.ts';

/** Lifecycle calls of one instance action in flight at once (each is one backend request). */
export const INSTANCE_ACTION_CONCURRENCY = 10;

export type WebUser = { id: string; email: string; isAdmin: boolean };

const formatUptime = (seconds: number) => {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${d > 0 ? `${d}d ` : ''}${h}h ${m}m ${s % 60}s`;
};

export type AgentsWebDeps = {
  db: Db;
  config: Pick<Config, 'AGENTS_DOMAIN' | 'PUBLIC_URL' | 'configured'>;
  secrets: Pick<Secrets, 'secretsEncryptionKey'>;
  backend: BackendClient;
  /** the model an agent of the user runs for the name asked (docs/agents.md "Model") */
  chooseModel?: (userId: string, asked: string | undefined) => Promise<string>;
  /** the models an agent of the user can run: allowed by their plan, served by a configured provider */
  runnableModels?: (userId: string) => Promise<{ id: string; name: string; provider: string }[]>;
  /**
   * §4.18 provisioning with channel tokens (docs/channels.md "API"), and a configuration saved
   * with them: checks the bot tokens in `config.channels` with their providers, and gives back the
   * configuration without them and how to store them as the agent's platform channels (so they
   * never reach the agent itself).
   */
  channelTokens?: (
    config: Record<string, unknown>,
  ) => Promise<{ config: Record<string, unknown>; save: (userId: string, agentId: string) => Promise<void> }>;
  log?: Logger;
};

export function createAgentsWebService(deps: AgentsWebDeps) {
  const { db, backend } = deps;

  const ownAgent = (userId: string, id: string) => findOwnAgent(db, userId, id);
  const toWeb = (a: AgentRow) => webAgent(a, deps.config.PUBLIC_URL);

  /** A backend answer other than 2xx as our error (4xx keep status and code; anything else is 500). */
  function backendFailure(r: BackendResponse, fallback: string): AppError {
    const code = typeof r.body.code === 'string' ? r.body.code : undefined;
    if (r.status === 404) return notFound('Agent not found');
    if (r.status >= 400 && r.status < 500 && r.status !== 401 && r.status !== 403) {
      const { error, code: _c, ...extra } = r.body;
      return new AppError(codeForBody(code) ?? 'BACKEND_ERROR', typeof error === 'string' ? error : fallback, extra, r.status);
    }
    return new AppError(codeForBody(code) ?? 'BACKEND_ERROR', fallback, undefined, 500);
  }

  async function call(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    userId: string,
    fallback: string,
    body?: unknown,
    timeoutMs: number = LIMITS.backendCallTimeoutMs,
  ) {
    let r: BackendResponse;
    try {
      r = await backend.call(method, path, { userId, body, timeoutMs });
    } catch (err) {
      if (err instanceof BackendUnreachableError) throw new AppError('BACKEND_UNAVAILABLE', fallback);
      throw err;
    }
    if (r.status < 200 || r.status >= 300) throw backendFailure(r, fallback);
    return r.body;
  }

  const path = (id: string, suffix = '') => `/api/agents/${encodeURIComponent(id)}${suffix}`;

  return {
    /**
     * §4.7 GET /api/agents: no session is an empty list, not 401. `only`: the agents an API key is
     * limited to (docs/payments.md "API keys"); the others are left out as if they were not there.
     */
    async list(user: WebUser | null, only?: readonly string[] | null) {
      if (!user) return { agents: [], count: 0, status: 'ok' as const };
      let rows = await db.withUser(user.id, (trx) => agentsRepo.listAgents(trx, user.id));
      if (only) rows = rows.filter((r) => only.includes(r.id));
      return { agents: rows.map(toWeb), count: rows.length, status: 'ok' as const };
    },

    /**
     * §4.7 POST /api/agents/provision. In one transaction holding the user's row lock: the
     * subscription check (active, or the session email is an admin's), the web limit, and the
     * insert with status `provisioning` — so parallel requests cannot pass the limit together.
     * Then the backend deployment is requested (15 s timeout); its failure moves the agent to
     * `error` (§3), a backend plan-limit refusal removes it again and answers 429 like this app's
     * own limit (§7: the agent limit is 429 on the web provisioning route).
     */
    async provision(
      user: WebUser,
      input: {
        name: string;
        model?: string | undefined;
        config?: Record<string, unknown> | undefined;
        tier?: string | undefined;
        /** docs/agents.md "A repository from the start" */
        gitInit?: boolean | undefined;
      },
    ) {
      // the one model the agent runs, by the owner's plan (docs/agents.md "Model"); 400 with the models that can run
      const model = deps.chooseModel ? await deps.chooseModel(user.id, input.model) : (input.model ?? DEFAULT_MODEL);
      // a refused bot token is a 400 before anything is stored
      const tokens = input.config && deps.channelTokens ? await deps.channelTokens(input.config) : undefined;
      input = { ...input, config: tokens?.config ?? input.config };
      const aiProvider = providerFor(input.model ?? DEFAULT_MODEL, input.config);
      const canSubscribe = deps.config.configured.stripe;
      let plan = '';
      const agent = await db.withUser(user.id, async (trx) => {
        const row = await agentsRepo.lockUser(trx, user.id);
        if (!row) throw new AppError('UNAUTHORIZED', 'Unauthorized');
        // §4.7's 402 applies where people can subscribe; without a card processor nobody can,
        // and every account has the operator's plan (DEFAULT_PLAN) instead (docs/admin.md)
        if (deps.config.configured.stripe && !user.isAdmin && row.subscription_status !== 'active') {
          throw new AppError('SUBSCRIPTION_REQUIRED', 'An active subscription is required to provision agents');
        }
        plan = agentPlan(user.isAdmin ? 'network' : row.plan, input.tier);
        const limit = webLimit(row.plan, user.isAdmin);
        const current = await agentsRepo.countAgents(trx, user.id);
        if (current >= limit) {
          const by = 'account';
          throw agentLimitReached({ plan: user.isAdmin ? 'network' : row.plan, limit, current, by, isAdmin: user.isAdmin, canSubscribe });
        }
        return insertAgentRecord(
          trx,
          { agentsDomain: deps.config.AGENTS_DOMAIN, secretsKey: deps.secrets.secretsEncryptionKey },
          {
            userId: user.id,
            name: input.name,
            model,
            aiProvider,
            status: 'provisioning',
            plan,
            ...(input.config ? { config: input.config } : {}),
          },
        );
      });

      await tokens?.save(user.id, agent.id);
      let outcome: BackendResponse | Error;
      try {
        outcome = await backend.call('POST', '/api/deployments', {
          userId: user.id,
          timeoutMs: LIMITS.provisioningTimeoutMs,
          body: {
            userId: user.id,
            agentId: agent.id,
            name: agent.name,
            model,
            aiProvider,
            plan,
            // an admin's agents count against the admin's own plan (network: the web app's elevated
            // limit above applies), not against the size chosen
            ...(user.isAdmin ? { limitPlan: 'network' } : {}),
            ...(input.config ? { config: input.config } : {}),
            ...(input.gitInit ? { gitInit: true } : {}),
          },
        });
      } catch (err) {
        outcome = err as Error;
      }
      if (!(outcome instanceof Error) && outcome.status >= 200 && outcome.status < 300) {
        return { success: true as const, agent: { ...toWeb(agent), status: agent.status } };
      }
      // refused before anything was deployed: a bad request, or gitInit where git cannot run sandboxed; no agent is kept
      if (!(outcome instanceof Error) && (outcome.status === 400 || outcome.body.code === 'GIT_UNAVAILABLE')) {
        await db.withUser(user.id, (trx) => agentsRepo.deleteAgent(trx, agent.id));
        const { error } = outcome.body;
        if (outcome.status === 400) throw backendFailure(outcome, 'Provisioning refused');
        throw new AppError('GIT_UNAVAILABLE', typeof error === 'string' ? error : 'git cannot run in a sandbox here', undefined, 503);
      }
      if (!(outcome instanceof Error) && outcome.status === 402) {
        await db.withUser(user.id, (trx) => agentsRepo.deleteAgent(trx, agent.id));
        const b = outcome.body;
        if (b.code !== 'AGENT_LIMIT_REACHED' || typeof b.limit !== 'number' || typeof b.current !== 'number')
          throw backendFailure(outcome, 'Agent limit reached');
        throw agentLimitReached({ plan, limit: b.limit, current: b.current, by: 'size', isAdmin: user.isAdmin, canSubscribe });
      }
      const why = outcome instanceof Error ? { err: outcome } : { status: outcome.status };
      deps.log?.warn({ agentId: agent.id, ...why }, 'provisioning request failed');
      await db.withUser(user.id, (trx) => agentsRepo.updateAgent(trx, agent.id, { status: 'error' }));
      throw new AppError('PROVISIONING_FAILED', 'Provisioning failed', { agentId: agent.id });
    },

    async provisionList(user: WebUser) {
      const rows = await db.withUser(user.id, (trx) => agentsRepo.listAgents(trx, user.id));
      return { success: true as const, agents: rows.map(toWeb), count: rows.length };
    },

    async get(user: WebUser, id: string) {
      return { agent: toWeb(await ownAgent(user.id, id)), status: 'ok' as const };
    },

    /** §4.7 PATCH: the database first; the backend sync is best effort (logged, never fails the rename). */
    async rename(user: WebUser, id: string, name: string) {
      const a = await db.withUser(user.id, (trx) => agentsRepo.updateAgent(trx, id, { name }));
      if (!a) throw notFound('Agent not found');
      await backend
        .call('PUT', path(id), { userId: user.id, body: { name }, timeoutMs: LIMITS.backendCallTimeoutMs })
        .then((r) => {
          if (r.status >= 300) deps.log?.warn({ agentId: id, status: r.status }, 'backend rename sync refused');
        })
        .catch((err) => deps.log?.warn({ agentId: id, err }, 'backend rename sync failed'));
      return { success: true as const, agent: { id: a.id, name: a.name, status: a.status, updatedAt: a.updated_at.toISOString() } };
    },

    async getConfig(user: WebUser, id: string) {
      const a = await ownAgent(user.id, id);
      const config = maskChannelSecrets((a.config ?? {}) as Record<string, unknown>, deps.secrets.secretsEncryptionKey);
      // the model the configuration shows is the record's, the one that runs (docs/agents.md "Model")
      return { config: withConfiguredModel(config, a.model), status: 'ok' as const };
    },

    /** §4.7 PUT config: forwarded to the backend, which stores it. */
    async putConfig(user: WebUser, id: string, config: Record<string, unknown>) {
      const a = await ownAgent(user.id, id);
      // a Telegram or Discord token becomes the agent's platform channel, as at provisioning
      const tokens = deps.channelTokens ? await deps.channelTokens(config) : undefined;
      config = tokens?.config ?? config;
      const body = await call('PUT', path(id), user.id, 'Config update failed', { config });
      await tokens?.save(user.id, id);
      const stored = maskChannelSecrets((body.config ?? config) as Record<string, unknown>, deps.secrets.secretsEncryptionKey);
      // as GET shows it: with the model that runs (the backend stored a new one in the configuration)
      return { config: withConfiguredModel(stored, configuredModel(stored) ?? a.model), status: 'updated' as const };
    },

    /**
     * The models an agent of the user can run (docs/agents.md "Model"): what the provisioning form
     * and the Configuration tab offer. With an agent id, 404 for an agent that is not the caller's.
     */
    async models(user: WebUser, id?: string) {
      if (id !== undefined) await ownAgent(user.id, id);
      const models = deps.runnableModels ? await deps.runnableModels(user.id) : [];
      // what an agent provisioned without a model would run; null when none can run
      const fallback = deps.chooseModel ? await deps.chooseModel(user.id, undefined).catch(() => null) : null;
      return { models, count: models.length, default: fallback };
    },

    /** §4.7 logs: the runtime's own log lines, read through the backend from the hosting driver. */
    async logs(user: WebUser, id: string, q: { limit: number; level?: string | undefined }) {
      await ownAgent(user.id, id);
      const qs = new URLSearchParams({ limit: String(q.limit), ...(q.level ? { level: q.level } : {}) });
      const body = await call('GET', path(id, `/logs?${qs}`), user.id, 'Logs unavailable');
      const lines = (Array.isArray(body.logs) ? body.logs : []) as { timestamp: string; level: string; message: string; source: string }[];
      const logs = lines.map((l, i) => ({
        id: `${id}-${Date.parse(l.timestamp) || 0}-${i}`,
        timestamp: l.timestamp,
        level: l.level,
        message: l.message,
        source: l.source,
        agentId: id,
      }));
      return { logs, total: logs.length, limit: q.limit, status: 'ok' as const };
    },

    /** §4.7 messages: stored chat messages, newest first in the order said (question before answer; migration 100). */
    async messages(user: WebUser, id: string, q: { limit: number; offset: number; session?: string | undefined }) {
      await ownAgent(user.id, id);
      const { rows, total } = await db.withUser(user.id, (trx) => agentMessagesRepo.listMessages(trx, id, q.limit, q.offset, q.session));
      return {
        messages: rows.map((m) => ({
          id: m.id,
          agentId: m.agent_id,
          sender: m.sender,
          content: m.content,
          timestamp: m.created_at.toISOString(),
          platform: m.platform,
          session: m.session_key,
        })),
        total,
        limit: q.limit,
        offset: q.offset,
        status: 'ok' as const,
      };
    },

    /** Stores one chat message (for the chat paths that talk to agents). */
    async recordMessage(
      userId: string,
      m: {
        agentId: string;
        sender: 'user' | 'agent' | 'system';
        content: string;
        platform?: string;
        responseMs?: number | null;
        failed?: boolean;
      },
    ) {
      return db.withUser(userId, (trx) => agentMessagesRepo.insertMessage(trx, { ...m, userId }));
    },

    /**
     * §4.7 stats: live from the hosting driver through the backend, with message metrics from the
     * stored messages; `status:'mock'` (zeros and the stored metrics) only when the backend
     * cannot be reached or fails.
     */
    async stats(user: WebUser, id: string) {
      const agent = await ownAgent(user.id, id);
      const m = await db.withUser(user.id, (trx) => agentMessagesRepo.messageStats(trx, id));
      let live: Record<string, unknown> | null = null;
      try {
        const r = await backend.call('GET', path(id, '/stats'), { userId: user.id, timeoutMs: LIMITS.backendCallTimeoutMs });
        if (r.status === 404) throw notFound('Agent not found');
        if (r.status === 200 && typeof r.body.stats === 'object' && r.body.stats) live = r.body.stats as Record<string, unknown>;
      } catch (err) {
        if (!(err instanceof BackendUnreachableError)) throw err;
      }
      const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
      const runtimeProcessed = live ? num(live.messagesProcessed) : 0;
      const processed = Math.max(m.processed, runtimeProcessed);
      const failed = Math.max(m.failed, live ? num(live.messagesFailed) : 0);
      const uptime = live ? num(live.uptime) : 0;
      const network =
        live && typeof live.network === 'object' && live.network ? (live.network as { rxBytes?: number; txBytes?: number }) : {};
      const stats = {
        agentId: id,
        cpu: live ? num(live.cpu) : 0,
        memory: live ? num(live.memory) : 0,
        memoryPercent: live ? num(live.memoryPercent) : 0,
        network: { rxBytes: num(network.rxBytes), txBytes: num(network.txBytes) },
        uptime,
        uptimeFormatted: formatUptime(uptime),
        status: live && typeof live.status === 'string' ? live.status : agent.status,
        pids: live ? num(live.pids) : 0,
        messagesProcessed: processed,
        messagesPerHour: m.last_hour,
        averageResponseTime: Math.round(m.avg_ms ?? (live ? num(live.averageResponseTimeMs) : 0)),
        successRate: processed > 0 ? Math.round(((processed - failed) / processed) * 10_000) / 100 : 100,
        errorRate: processed > 0 ? Math.round((failed / processed) * 10_000) / 100 : 0,
      };
      return { stats, status: live ? ('ok' as const) : ('mock' as const) };
    },

    /** Web DELETE /api/agents/:id (added): the backend removes the record and the hosting unit. */
    async remove(user: WebUser, id: string) {
      await ownAgent(user.id, id);
      await call('DELETE', path(id), user.id, 'Delete failed');
      return { success: true as const, id, deleted: true as const };
    },

    /**
     * /api/instance/:userId/:action (§4.18, designed): the session user must be :userId (404
     * otherwise: another user's instance does not exist for you). Acts on `agentId` when given,
     * else on every agent of the user, through the backend lifecycle routes.
     */
    async instanceAction(user: WebUser, targetUserId: string, action: LifecycleAction, agentId?: string) {
      if (targetUserId.toLowerCase() !== user.id.toLowerCase()) throw notFound('Instance not found');
      const rows = agentId ? [await ownAgent(user.id, agentId)] : await db.withUser(user.id, (trx) => agentsRepo.listAgents(trx, user.id));
      // the agents are independent: act on them concurrently (a restart of ten took 3-5 s one by one),
      // at most INSTANCE_ACTION_CONCURRENCY at a time; every call finishes before the first failure is reported
      const results: { id: string; status: string }[] = new Array(rows.length);
      let next = 0;
      let failure: unknown;
      const worker = async () => {
        while (next < rows.length) {
          const i = next++;
          const a = rows[i]!;
          try {
            const body = await call('POST', path(a.id, `/${action}`), user.id, `${action} failed`);
            results[i] = { id: a.id, status: String(body.status ?? a.status) };
          } catch (err) {
            failure ??= err;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(INSTANCE_ACTION_CONCURRENCY, rows.length) }, worker));
      if (failure !== undefined) throw failure;
      return { success: true as const, action, userId: user.id, agents: results };
    },
  };
}

export type AgentsWebService = ReturnType<typeof createAgentsWebService>;
