/**
 * When each agent last had traffic (docs/agents.md "Idle agents sleep"), counted in this process's
 * memory and written to `agents.last_active_at` every `flushMs` (and before each idle sweep): a
 * call to an agent costs one Map write, never a database round trip. An agent with a request or a
 * socket still open (`busy`) counts as seen at every flush, so a long answer or an open socket
 * never lets it look idle. With idle suspension off, nothing is recorded at all (`createAgentTraffic`
 * is not built and callers get `noTraffic`).
 */
import type { Db } from '../../../db/client.ts';
import { createHoldCounts } from '../../../lib/hold-counts.ts';
import type { Logger } from '../../../lib/logger.ts';
import { idleAgentsRepo } from './idle-agents.repo.ts';

export type AgentTrafficRecorder = {
  /** the agent had traffic now */
  touch(agentId: string): void;
  /** the agent serves something until the returned function is called (once) */
  busy(agentId: string): () => void;
};

/** The shape of an agent id (migration 002's CHECK). */
const AGENT_ID = /^[a-z0-9][a-z0-9-]{2,62}$/;

/** What callers use when agents never sleep: records nothing. */
export const noTraffic: AgentTrafficRecorder = { touch: () => {}, busy: () => () => {} };

export function createAgentTraffic(deps: { db: Db; flushMs: number; log?: Logger | undefined; now?: () => number }) {
  const now = deps.now ?? Date.now;
  let seen = new Map<string, number>();
  const open = createHoldCounts();
  const lastSeen = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();

  const startTimer = () => {
    if (timer) return;
    timer = setInterval(() => void flush(), deps.flushMs);
    timer.unref();
  };

  function touch(agentId: string) {
    if (!AGENT_ID.test(agentId)) return; // only what can be an agent's id (a bad one would fail the whole batch)
    const t = now();
    seen.set(agentId, t);
    lastSeen.set(agentId, t);
    startTimer();
  }

  /** Writes what was seen since the last flush (and every busy agent as seen now); one statement. */
  function flush(): Promise<void> {
    flushing = flushing.then(async () => {
      const t = now();
      for (const id of open.held()) seen.set(id, t);
      if (seen.size === 0) return;
      const batch = seen;
      seen = new Map();
      if (lastSeen.size > 50_000) lastSeen.clear(); // a hint for the sweep only: the database has the truth
      try {
        await idleAgentsRepo.recordTraffic(deps.db.kysely, { ids: [...batch.keys()], at: [...batch.values()].map((ms) => new Date(ms)) });
      } catch (err) {
        // kept for the next flush: an agent must not look idle because one write failed
        for (const [id, at] of batch) if ((seen.get(id) ?? 0) < at) seen.set(id, at);
        deps.log?.warn({ err }, 'agent traffic not recorded');
      }
    });
    return flushing;
  }

  return {
    touch,
    busy(agentId: string): () => void {
      const release = open.hold(agentId, () => touch(agentId));
      touch(agentId);
      return release;
    },
    /** Whether this process saw the agent since `sinceMs` or serves it now (the sweep's last look before it suspends). */
    activeSince(agentId: string, sinceMs: number): boolean {
      return open.count(agentId) > 0 || (lastSeen.get(agentId) ?? 0) >= sinceMs;
    },
    flush,
    /** Stops the timer and writes what is left (the platform's close). */
    async close() {
      clearInterval(timer);
      timer = undefined;
      await flush();
    },
  };
}

export type AgentTraffic = ReturnType<typeof createAgentTraffic>;
