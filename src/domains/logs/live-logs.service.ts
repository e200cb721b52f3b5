/**
 * Live log streaming (§4.7's planned `/api/logs/:agentId/stream`, `/history`, `/stop`, `/active`):
 * one poller per (owner, agent) however many streams watch it, reading the same lines as
 * `GET /api/agents/:id/logs` (the hosting driver through the backend, so both drivers work the
 * same way), and fanning new lines out to every subscriber. The poller starts with the first
 * subscriber and stops with the last, so a client that disconnects releases everything it held.
 */
export type LiveLine = { id: string; timestamp: string; level: string; message: string; source: string; agentId: string };

export type LiveLogsDeps = {
  /** the newest lines, oldest first (agentsWeb.logs) */
  fetch(userId: string, agentId: string): Promise<LiveLine[]>;
  intervalMs?: number;
};

type Subscriber = { onLine(line: LiveLine): void; onEnd(reason: string): void };
type Poller = {
  subscribers: Set<Subscriber>;
  timer: NodeJS.Timeout | undefined;
  lastTs: string;
  seenAtLast: Set<string>;
  primed: boolean;
  busy: boolean;
};

const lineKey = (l: LiveLine) => `${l.timestamp}\u0000${l.source}\u0000${l.message}`;

export function createLiveLogs(deps: LiveLogsDeps) {
  const intervalMs = deps.intervalMs ?? 1000;
  const pollers = new Map<string, Poller>();
  const keyOf = (userId: string, agentId: string) => `${userId}\u0000${agentId}`;

  async function poll(userId: string, agentId: string, p: Poller) {
    if (p.busy) return;
    p.busy = true;
    try {
      const lines = await deps.fetch(userId, agentId);
      const fresh: LiveLine[] = [];
      for (const l of lines) {
        if (l.timestamp < p.lastTs) continue;
        if (l.timestamp === p.lastTs && p.seenAtLast.has(lineKey(l))) continue;
        fresh.push(l);
      }
      for (const l of fresh) {
        if (l.timestamp > p.lastTs) {
          p.lastTs = l.timestamp;
          p.seenAtLast = new Set();
        }
        p.seenAtLast.add(lineKey(l));
      }
      // the first read only sets where "new" starts: history is /history's job
      if (p.primed) for (const l of fresh) for (const s of p.subscribers) s.onLine(l);
      p.primed = true;
    } catch (err) {
      // the agent is gone or no longer the caller's: end every stream of it
      const status = (err as { status?: number }).status;
      if (status === 404) for (const s of [...p.subscribers]) s.onEnd('Agent not found');
    } finally {
      p.busy = false;
    }
  }

  return {
    /** Starts (or joins) the poller of this agent; the returned function releases it. */
    subscribe(userId: string, agentId: string, subscriber: Subscriber): () => void {
      const key = keyOf(userId, agentId);
      let p = pollers.get(key);
      if (!p) {
        const poller: Poller = { subscribers: new Set(), timer: undefined, lastTs: '', seenAtLast: new Set(), primed: false, busy: false };
        poller.timer = setInterval(() => void poll(userId, agentId, poller), intervalMs);
        poller.timer.unref();
        void poll(userId, agentId, poller);
        pollers.set(key, poller);
        p = poller;
      }
      const poller = p;
      poller.subscribers.add(subscriber);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        poller.subscribers.delete(subscriber);
        if (poller.subscribers.size === 0) {
          clearInterval(poller.timer);
          pollers.delete(key);
        }
      };
    },

    /** Ends every stream the user has open on this agent; how many there were. */
    stop(userId: string, agentId: string): number {
      const p = pollers.get(keyOf(userId, agentId));
      if (!p) return 0;
      const subs = [...p.subscribers];
      for (const s of subs) s.onEnd('Stopped');
      return subs.length;
    },

    /** Streams the user has open on this agent. */
    active(userId: string, agentId: string): number {
      return pollers.get(keyOf(userId, agentId))?.subscribers.size ?? 0;
    },

    /** Pollers and subscribers alive in this process (tests: nothing leaks). */
    counts() {
      let subscribers = 0;
      for (const p of pollers.values()) subscribers += p.subscribers.size;
      return { pollers: pollers.size, subscribers };
    },

    close() {
      for (const p of pollers.values()) {
        clearInterval(p.timer);
        for (const s of [...p.subscribers]) s.onEnd('Server shutting down');
      }
      pollers.clear();
    },
  };
}

export type LiveLogs = ReturnType<typeof createLiveLogs>;
