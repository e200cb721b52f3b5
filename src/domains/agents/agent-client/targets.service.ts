/**
 * Where and how the platform reaches one of a user's agents: its gateway's base URL and the
 * gateway token (decrypted here and nowhere else, only ever sent to the agent; never to a browser
 * or a client). Read under the user's row-level security, so another user's agent is "not found"
 * exactly like a missing one (§4.7: 404 for both). The agent client (`agent.client.ts`) is the one
 * user of what this returns: gateway chat (§4.8), REST chat (§4.18), the `agent` plugin and the
 * authenticated gateway proxy (docs/agents.md "Talk to your agent").
 */
import type { Db } from '../../../db/client.ts';
import { decryptSecret } from '../../../lib/crypto.ts';
import { AppError, notFound } from '../../../lib/errors.ts';
import { type AgentRow, agentsRepo } from '../agents.repo.ts';
import { type AgentTrafficRecorder, noTraffic } from '../idle/agent-traffic.service.ts';

export type AgentTarget = {
  agent: AgentRow;
  /** http(s) base URL of the agent's gateway, without a trailing slash */
  baseUrl: string;
  /** the agent's gateway token (secret) */
  token: string;
};

/** §4.8 gateway chat lists 503 for "no gateway token"; the same applies to every way in. */
export const noGatewayToken = () => new AppError('NO_GATEWAY_TOKEN', 'This agent has no gateway token yet; try again once it is running');

/**
 * `ttlMs` (default 2 s) keeps a resolved target for repeated calls of one owner to one agent (the
 * proxy's hot path: a row-level-security transaction and a decryption each time otherwise). The
 * key includes the user, so a cached target is only ever served to its owner. A target can be at
 * most `ttlMs` stale: a deleted agent's proxy answers 502 for that long at worst, and a gateway
 * that moved (a restart on a new port) is looked up again as soon as a call fails to connect
 * (`forget`).
 */
export function createAgentTargets(deps: {
  db: Db;
  secretsKey: Buffer;
  ttlMs?: number;
  now?: () => number;
  /**
   * Idle agents (docs/agents.md "Idle agents sleep"): every resolved target is traffic, and a
   * `suspended` agent is woken before its target is answered (idle-agents.service.ts), so every way
   * in (chat, the proxy, heartbeats, the `agent` plugin) waits for it rather than failing.
   */
  traffic?: AgentTrafficRecorder;
  wake?: (agent: AgentRow) => Promise<AgentRow>;
}) {
  const ttlMs = deps.ttlMs ?? 2000;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, { target: AgentTarget; until: number }>();
  const traffic = deps.traffic ?? noTraffic;
  /** The agent awake: a suspended one is woken first (its record then reads running). */
  const awake = async (agent: AgentRow): Promise<AgentRow> => (agent.status === 'suspended' && deps.wake ? deps.wake(agent) : agent);
  /** Statuses of an agent that serves, or will once woken. */
  const serving = (a: AgentRow) => a.status === 'running' || a.status === 'suspended';

  function target(agent: AgentRow, tokenEnc: string | undefined): AgentTarget {
    const base = agent.gateway_url ?? agent.url;
    if (!tokenEnc || !base) throw noGatewayToken();
    let token: string;
    try {
      token = decryptSecret(deps.secretsKey, tokenEnc);
    } catch {
      throw noGatewayToken();
    }
    return { agent, baseUrl: base.replace(/\/+$/, ''), token };
  }

  return {
    /** The user's agent `agentId` (404 when missing or someone else's). */
    async byId(userId: string, agentId: string, options: { fresh?: boolean } = {}): Promise<AgentTarget> {
      const cacheKey = `${userId}\u0000${agentId}`;
      const hit = options.fresh ? undefined : cache.get(cacheKey);
      if (hit && hit.until > now()) {
        traffic.touch(agentId);
        return hit.target;
      }
      const found = await deps.db.withUser(userId, async (trx) => {
        const agent = await agentsRepo.findAgent(trx, agentId);
        if (!agent) return undefined;
        return { agent, creds: await agentsRepo.getCredentials(trx, agentId) };
      });
      if (!found) throw notFound('Agent not found');
      traffic.touch(agentId);
      const t = target(await awake(found.agent), found.creds?.gateway_token_enc);
      if (ttlMs > 0) {
        if (cache.size >= 10_000) cache.delete(cache.keys().next().value!);
        cache.set(cacheKey, { target: t, until: now() + ttlMs });
      }
      return t;
    },

    /** Drops a cached target (its gateway did not answer: it may have moved). */
    forget(userId: string, agentId: string) {
      cache.delete(`${userId}\u0000${agentId}`);
    },

    /**
     * §4.8 "the caller's agent" when none is named: the newest running (or sleeping, then woken)
     * one, else the newest one (its state then decides the answer). 404 `No agent found` when the user has none.
     */
    async defaultFor(userId: string): Promise<AgentTarget> {
      const found = await deps.db.withUser(userId, async (trx) => {
        const agents = await agentsRepo.listAgents(trx, userId);
        const agent = agents.find(serving) ?? agents[0];
        if (!agent) return undefined;
        return { agent, creds: await agentsRepo.getCredentials(trx, agent.id) };
      });
      if (!found) throw notFound('No agent found');
      traffic.touch(found.agent.id);
      return target(await awake(found.agent), found.creds?.gateway_token_enc);
    },

    /**
     * The `agent` plugin's agent (§4.8 "orchestrator"): the user's oldest running (or active, or
     * sleeping, then woken) agent with a gateway address and a token; undefined when there is none.
     * `agentIds` (an API key limited to some agents, docs/payments.md "API keys"): only one of these.
     */
    async running(userId: string, agentIds?: readonly string[] | null): Promise<AgentTarget | undefined> {
      const found = await deps.db.withUser(userId, async (trx) => {
        const agents = await agentsRepo.listAgents(trx, userId);
        // listAgents is newest first
        for (const agent of agents.toReversed()) {
          if (agentIds && !agentIds.includes(agent.id)) continue;
          if ((!serving(agent) && agent.status !== 'active') || !agent.gateway_url) continue;
          const creds = await agentsRepo.getCredentials(trx, agent.id);
          if (creds) return { agent, creds };
        }
        return undefined;
      });
      if (!found) return undefined;
      traffic.touch(found.agent.id);
      return target(await awake(found.agent), found.creds.gateway_token_enc);
    },
  };
}

export type AgentTargets = ReturnType<typeof createAgentTargets>;
