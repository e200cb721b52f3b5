/**
 * The bot connections a backend process runs (docs/channels.md "Connections"): one per enabled
 * agent channel, started on boot and whenever a channel is added, reconnected when its token or
 * switch changes (`revision`), stopped when it is disabled or deleted (with its agent, by cascade).
 * Each connection is held under a lease in its row, so replicas never run one bot twice (Telegram
 * answers a second poller 409) and a dead process's bots are taken over once its lease lapses. A
 * connection that fails is logged once per change of the channel, its error shown to the owner,
 * and retried after a doubling backoff. Tokens are opened here, in the platform's process, and
 * handed to the provider's client only: never to the agent, never logged.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { decryptSecret } from '../../lib/crypto.ts';
import type { Logger } from '../../lib/logger.ts';
import type { ChannelInbound } from './channel-inbound.service.ts';
import { channelsRepo } from './channels.repo.ts';
import type { ChannelConnector, ChannelKind, ChannelProvider } from './connector.ts';

export type ChannelProviders = Record<ChannelKind, ChannelProvider | undefined>;

type Running = { revision: number; connector: ChannelConnector };
type Retry = { revision: number; attempts: number; notBefore: number };

export function createChannelConnections(deps: {
  db: Db;
  secretsKey: Buffer;
  providers: ChannelProviders;
  inbound: ChannelInbound;
  log: Logger;
  /** how often to look for channels to start, stop or take over */
  syncMs: number;
  /** first retry after a failure; doubles up to `retryCapMs` */
  retryBaseMs?: number;
  retryCapMs?: number;
  now?: () => number;
}) {
  const { db, log } = deps;
  const now = deps.now ?? Date.now;
  const holder = `channels-${randomUUID()}`;
  const leaseMs = Math.max(30_000, deps.syncMs * 3);
  const retryBaseMs = deps.retryBaseMs ?? 2_000;
  const retryCapMs = deps.retryCapMs ?? 5 * 60_000;
  const running = new Map<string, Running>();
  const retries = new Map<string, Retry>();
  let timer: NodeJS.Timeout | undefined;
  let syncing: Promise<void> | undefined;
  let again = false;
  let stopped = true;

  const keyOf = (agentId: string, kind: string) => `${agentId}\n${kind}`;

  function failed(c: { agentId: string; kind: ChannelKind; revision: number }, err: Error) {
    const key = keyOf(c.agentId, c.kind);
    const prev = retries.get(key);
    const attempts = prev?.revision === c.revision ? prev.attempts + 1 : 1;
    const wait = Math.min(retryCapMs, retryBaseMs * 2 ** (attempts - 1));
    retries.set(key, { revision: c.revision, attempts, notBefore: now() + wait });
    // once per change of the channel: a bot that stays refused does not fill the log
    if (attempts === 1)
      log.warn({ agentId: c.agentId, kind: c.kind, error: err.message }, 'channel connection failed; retrying with backoff');
    else log.debug({ agentId: c.agentId, kind: c.kind, attempts, error: err.message }, 'channel connection failed again');
    void channelsRepo
      .setStatus(db.kysely, { ...c, holder }, { status: 'error', error: err.message.slice(0, 500) })
      .catch((e: unknown) => log.warn({ err: e }, 'channel status not recorded'));
  }

  async function open(c: { agent_id: string; user_id: string; kind: ChannelKind; token_enc: string; revision: number }) {
    const ref = { agentId: c.agent_id, kind: c.kind, revision: c.revision };
    const key = keyOf(c.agent_id, c.kind);
    const provider = deps.providers[c.kind];
    if (!provider) return failed(ref, new Error(`${c.kind} is not available on this platform`));
    let connector: ChannelConnector;
    try {
      connector = provider.connect({
        token: decryptSecret(deps.secretsKey, c.token_enc),
        log,
        onMessage: (m) =>
          deps.inbound(
            {
              agentId: c.agent_id,
              userId: c.user_id,
              kind: c.kind,
              maxMessageChars: provider.maxMessageChars,
              send: (chatId, text) => connector.send(chatId, text),
              typing: (chatId) => connector.typing(chatId),
            },
            m,
          ),
        onFailure: (err) => {
          if (running.get(key)?.connector !== connector) return;
          running.delete(key);
          void connector.stop().catch(() => {});
          failed(ref, err);
        },
      });
    } catch (err) {
      return failed(ref, err as Error);
    }
    running.set(key, { revision: c.revision, connector });
    try {
      const bot = await connector.start();
      if (running.get(key)?.connector !== connector) return; // stopped meanwhile
      retries.delete(key);
      await channelsRepo.setStatus(db.kysely, { ...ref, holder }, { status: 'connected', bot });
      log.info({ agentId: c.agent_id, kind: c.kind, bot: bot.username }, 'channel connected');
    } catch (err) {
      if (running.get(key)?.connector === connector) running.delete(key);
      await connector.stop().catch(() => {});
      failed(ref, err as Error);
    }
  }

  async function close(key: string) {
    const r = running.get(key);
    running.delete(key);
    await r?.connector.stop().catch((err: unknown) => log.warn({ err }, 'channel connection did not stop cleanly'));
  }

  async function syncOnce() {
    const claimed = await channelsRepo.claim(db.kysely, holder, leaseMs);
    const wanted = new Set(claimed.map((c) => keyOf(c.agent_id, c.kind)));
    await Promise.all([...running.keys()].filter((k) => !wanted.has(k)).map(close));
    for (const c of claimed) {
      const key = keyOf(c.agent_id, c.kind);
      const r = running.get(key);
      if (r?.revision === c.revision) continue;
      if (r) await close(key);
      const retry = retries.get(key);
      if (retry && retry.revision === c.revision && retry.notBefore > now()) continue;
      // not awaited: a provider that takes long to answer must not hold up the other channels (open marks it running at once)
      void open(c).catch((err: unknown) => log.warn({ err }, 'channel connection not opened'));
    }
  }

  /** One pass; a pass asked for while one runs runs right after it. */
  function sync(): Promise<void> {
    if (stopped) return Promise.resolve();
    if (syncing) {
      again = true;
      return syncing;
    }
    syncing = (async () => {
      do {
        again = false;
        await syncOnce().catch((err: unknown) => log.warn({ err }, 'channel connections not synchronised'));
      } while (again && !stopped);
    })().finally(() => {
      syncing = undefined;
    });
    return syncing;
  }

  return {
    /** Starts the connections of every enabled channel this process can hold, then looks again every `syncMs`. */
    async start() {
      if (!stopped) return;
      stopped = false;
      await sync();
      timer = setInterval(() => void sync(), deps.syncMs);
      timer.unref();
    },
    /** Looks at once (a channel was changed through this process's API). */
    nudge: () => void sync(),
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await syncing;
      await Promise.all([...running.keys()].map(close));
      await channelsRepo.release(db.kysely, holder).catch((err: unknown) => log.warn({ err }, 'channel leases not released'));
    },
  };
}

export type ChannelConnections = ReturnType<typeof createChannelConnections>;
