/**
 * The bridge: an internal message bus between the platform's agents and its operator (§2 Bridge
 * message, §4.13). Messages go to one of three channels; each reader sees a message once
 * (per-reader read tracking), and the `unknown` reader only peeks.
 */
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { badRequest } from '../../lib/errors.ts';
import { type BridgeMessageRow, bridgeRepo } from './bridge.repo.ts';

/**
 * The operator's sender identity (§4.13 `<operator_identity>`): the human running the platform,
 * posting next to its agents `atlas-main` and `atlas-service`. A fixed public name, not a secret.
 */
export const BRIDGE_OPERATOR_IDENTITY = 'operator';
export const BRIDGE_SENDERS = ['atlas-main', 'atlas-service', BRIDGE_OPERATOR_IDENTITY] as const;
export const BRIDGE_CHANNELS = ['general', 'tasks', 'alerts'] as const;
/** §2 says only "default normal"; this small ordered set is our choice (also a CHECK in migration 004). */
export const BRIDGE_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
/** The reader name that reads without marking anything read (§4.13). */
export const UNKNOWN_READER = 'unknown';

const isOneOf = <T extends string>(list: readonly T[], v: unknown): v is T =>
  typeof v === 'string' && (list as readonly string[]).includes(v);

export type SendInput = { sender?: unknown; content?: unknown; channel?: unknown; priority?: unknown };
export type InboxQuery = { channel?: unknown; since?: unknown; reader?: unknown; limit?: unknown };

export type BridgeMessage = { id: string; sender: string; channel: string; content: string; priority: string; created_at: string };

const toMessage = (m: BridgeMessageRow): BridgeMessage => ({
  id: m.id,
  sender: m.sender,
  channel: m.channel,
  content: m.content,
  priority: m.priority,
  created_at: m.created_at.toISOString(),
});

/** `since`: an ISO 8601 timestamp or epoch milliseconds; default the last 24 hours (§8). */
function parseSince(value: unknown, now: Date): Date {
  if (value === undefined || value === '') return new Date(now.getTime() - LIMITS.bridgeInboxWindowMs);
  if (typeof value !== 'string' || value.length > 64) throw badRequest('invalid since');
  const ms = /^\d{1,15}$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) throw badRequest('invalid since');
  return new Date(ms);
}

/** `limit`: a positive whole number, default 50, values above 100 are capped to 100 (§8). */
function parseLimit(value: unknown): number {
  if (value === undefined || value === '') return LIMITS.bridgeInboxDefaultLimit;
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value) || Number(value) < 1) throw badRequest('invalid limit');
  return Math.min(Number(value), LIMITS.bridgeInboxMaxLimit);
}

function parseReader(value: unknown): string {
  if (value === undefined) return UNKNOWN_READER;
  if (typeof value !== 'string' || value.trim().length > LIMITS.bridgeReaderMax) throw badRequest('invalid reader');
  return value.trim() || UNKNOWN_READER;
}

export function createBridgeService(deps: { db: Db; now?: () => Date }) {
  const { db } = deps;
  const now = deps.now ?? (() => new Date());

  return {
    /** §4.13 POST /api/bridge/send. */
    async send(input: SendInput) {
      const { sender, content } = input;
      if (typeof sender !== 'string' || !sender.trim() || typeof content !== 'string' || !content.trim()) {
        throw badRequest('sender and content are required');
      }
      if (!isOneOf(BRIDGE_SENDERS, sender)) throw badRequest('invalid sender');
      const channel = input.channel ?? 'general';
      if (!isOneOf(BRIDGE_CHANNELS, channel)) throw badRequest('invalid channel');
      const priority = input.priority ?? 'normal';
      if (!isOneOf(BRIDGE_PRIORITIES, priority)) throw badRequest('invalid priority');
      if (content.length > LIMITS.bridgeContentMax) throw badRequest(`content must be at most ${LIMITS.bridgeContentMax} characters`);
      const row = await bridgeRepo.insert(db.kysely, { sender, channel, content, priority });
      return { id: row.id, sender: row.sender, channel: row.channel, priority: row.priority, created_at: row.created_at.toISOString() };
    },

    /**
     * §4.13 GET /api/bridge/inbox: messages of a channel since a time, oldest first, that this
     * reader has not read yet; they are marked read for the reader (not for `unknown`). When two
     * calls of one reader race, each message goes to exactly one of them.
     */
    async inbox(query: InboxQuery) {
      const channel = query.channel ?? 'general';
      if (!isOneOf(BRIDGE_CHANNELS, channel)) throw badRequest('invalid channel');
      const since = parseSince(query.since, now());
      const limit = parseLimit(query.limit);
      const reader = parseReader(query.reader);
      const rows =
        reader === UNKNOWN_READER
          ? await bridgeRepo.list(db.kysely, { channel, since, limit })
          : await bridgeRepo.claim(db.kysely, { channel, since, limit, reader });
      const messages = rows.map(toMessage);
      return { ok: true as const, channel, count: messages.length, messages };
    },

    /** §4.13 GET /api/bridge/health. */
    async health() {
      const s = await bridgeRepo.stats(db.kysely);
      return {
        status: 'ok' as const,
        total_messages: s.total,
        last_message: s.last ? { created_at: s.last.created_at.toISOString(), sender: s.last.sender, channel: s.last.channel } : null,
        channels: [...BRIDGE_CHANNELS],
        senders: [...BRIDGE_SENDERS],
        timestamp: now().toISOString(),
      };
    },
  };
}

export type BridgeService = ReturnType<typeof createBridgeService>;
