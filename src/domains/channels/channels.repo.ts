/**
 * SQL of agents' messaging channels (migration 251). What an owner reads and changes runs in the
 * RLS-bound transaction of `db.withUser`; what the connections of a backend process need across
 * owners (which channels to run, their status) runs on the owner connection (`db.kysely`), as the
 * deployment jobs and the watchdog do.
 */
import { type Kysely, sql } from 'kysely';
import type { Tx } from '../../db/client.ts';
import type { DB } from '../../db/types.gen.ts';
import type { ChannelKind } from './connector.ts';

const PUBLIC_COLUMNS = [
  'kind',
  'token_hint',
  'bot_id',
  'bot_username',
  'allow_from',
  'enabled',
  'status',
  'last_error',
  'created_at',
  'updated_at',
] as const;

export const channelsRepo = {
  async agentExists(trx: Tx, agentId: string) {
    return !!(await trx.selectFrom('agents').select('id').where('id', '=', agentId).executeTakeFirst());
  },

  list(trx: Tx, agentId: string) {
    return trx.selectFrom('agent_channels').select(PUBLIC_COLUMNS).where('agent_id', '=', agentId).orderBy('kind').execute();
  },

  find(trx: Tx, agentId: string, kind: ChannelKind) {
    return trx
      .selectFrom('agent_channels')
      .select([...PUBLIC_COLUMNS, 'token_enc'])
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .executeTakeFirst();
  },

  insert(
    trx: Tx,
    c: {
      agentId: string;
      userId: string;
      kind: ChannelKind;
      token: { enc: string; hint: string; botId: string; botUsername: string };
      allowFrom: string[];
      enabled: boolean;
    },
  ) {
    return trx
      .insertInto('agent_channels')
      .values({
        agent_id: c.agentId,
        user_id: c.userId,
        kind: c.kind,
        token_enc: c.token.enc,
        token_hint: c.token.hint,
        bot_id: c.token.botId,
        bot_username: c.token.botUsername,
        allow_from: c.allowFrom,
        enabled: c.enabled,
        status: c.enabled ? 'connecting' : 'disabled',
      })
      .returning(PUBLIC_COLUMNS)
      .executeTakeFirstOrThrow();
  },

  /**
   * Changes an existing channel (a new token, the allow list, on or off). A new token or switching
   * bumps `revision`, so the process holding the connection reconnects with what is now stored.
   */
  update(
    trx: Tx,
    agentId: string,
    kind: ChannelKind,
    s: { token?: { enc: string; hint: string; botId: string; botUsername: string }; allowFrom?: string[]; enabled?: boolean },
  ) {
    const enabled = s.enabled === undefined ? sql<boolean>`enabled` : sql<boolean>`${s.enabled}::boolean`;
    return trx
      .updateTable('agent_channels')
      .set({
        ...(s.token ? { token_enc: s.token.enc, token_hint: s.token.hint, bot_id: s.token.botId, bot_username: s.token.botUsername } : {}),
        ...(s.allowFrom ? { allow_from: s.allowFrom } : {}),
        // the allow list is read for every message: only a new token or switching on or off reconnects
        ...(s.token || s.enabled !== undefined
          ? {
              enabled,
              status: sql`CASE WHEN ${enabled} THEN 'connecting' ELSE 'disabled' END`,
              last_error: null,
              revision: sql`revision + 1`,
            }
          : {}),
        updated_at: sql`now()`,
      })
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .returning(PUBLIC_COLUMNS)
      .executeTakeFirst();
  },

  async remove(trx: Tx, agentId: string, kind: ChannelKind) {
    const r = await trx.deleteFrom('agent_channels').where('agent_id', '=', agentId).where('kind', '=', kind).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },

  recentSenders(trx: Tx, agentId: string, limit: number) {
    return trx
      .selectFrom('channel_senders')
      .select(['kind', 'sender_id', 'username', 'display_name', 'messages', 'allowed', 'last_seen_at'])
      .where('agent_id', '=', agentId)
      .orderBy('last_seen_at', 'desc')
      .limit(limit)
      .execute();
  },

  pendingPairings(trx: Tx, agentId: string) {
    return trx
      .selectFrom('channel_pairings')
      .select(['kind', 'code', 'sender_id', 'username', 'created_at', 'expires_at'])
      .where('agent_id', '=', agentId)
      .where('expires_at', '>', sql<Date>`now()`)
      .orderBy('created_at', 'desc')
      .execute();
  },

  /** Takes a live pairing code: the sender it was given to, or undefined (unknown or expired). */
  takePairing(trx: Tx, agentId: string, kind: ChannelKind, code: string) {
    return trx
      .deleteFrom('channel_pairings')
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .where('code', '=', code)
      .where('expires_at', '>', sql<Date>`now()`)
      .returning(['sender_id', 'username'])
      .executeTakeFirst();
  },

  /** Adds a sender to the allow list (once) and marks them allowed among the senders. */
  async allowSender(trx: Tx, agentId: string, kind: ChannelKind, senderId: string) {
    await trx
      .updateTable('agent_channels')
      .set({
        allow_from: sql`CASE WHEN ${senderId} = ANY(allow_from) THEN allow_from ELSE array_append(allow_from, ${senderId}::text) END`,
        updated_at: sql`now()`,
      })
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .execute();
    await trx
      .updateTable('channel_senders')
      .set({ allowed: true })
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .where('sender_id', '=', senderId)
      .execute();
  },

  /** What an inbound message is checked against: the channel's allow list, read fresh for each message. */
  inboundSettings(trx: Tx, agentId: string, kind: ChannelKind) {
    return trx
      .selectFrom('agent_channels')
      .select(['allow_from', 'enabled'])
      .where('agent_id', '=', agentId)
      .where('kind', '=', kind)
      .executeTakeFirst();
  },

  async senderSeen(
    trx: Tx,
    s: {
      agentId: string;
      userId: string;
      kind: ChannelKind;
      senderId: string;
      username?: string | undefined;
      displayName?: string | undefined;
      allowed: boolean;
    },
  ) {
    await trx
      .insertInto('channel_senders')
      .values({
        agent_id: s.agentId,
        user_id: s.userId,
        kind: s.kind,
        sender_id: s.senderId,
        username: s.username ?? null,
        display_name: s.displayName ?? null,
        allowed: s.allowed,
      })
      .onConflict((oc) =>
        oc.columns(['agent_id', 'kind', 'sender_id']).doUpdateSet({
          username: s.username ?? null,
          display_name: s.displayName ?? null,
          allowed: s.allowed,
          messages: sql`channel_senders.messages + 1`,
          last_seen_at: sql`now()`,
        }),
      )
      .execute();
  },

  /** The sender's live pairing code, or a new one (`code`) valid for `ttlMs`; undefined when `maxPending` codes already wait. */
  async pairingFor(
    trx: Tx,
    p: {
      agentId: string;
      userId: string;
      kind: ChannelKind;
      senderId: string;
      username?: string | undefined;
      code: string;
      ttlMs: number;
      maxPending: number;
    },
  ) {
    // strangers writing at once take their turn on the channel's row, so the cap holds (rule 5)
    await trx
      .selectFrom('agent_channels')
      .select('kind')
      .where('agent_id', '=', p.agentId)
      .where('kind', '=', p.kind)
      .forUpdate()
      .execute();
    const live = await trx
      .selectFrom('channel_pairings')
      .select('code')
      .where('agent_id', '=', p.agentId)
      .where('kind', '=', p.kind)
      .where('sender_id', '=', p.senderId)
      .where('expires_at', '>', sql<Date>`now()`)
      .executeTakeFirst();
    if (live) return live.code;
    const pending = await trx
      .selectFrom('channel_pairings')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('agent_id', '=', p.agentId)
      .where('kind', '=', p.kind)
      .where('expires_at', '>', sql<Date>`now()`)
      .executeTakeFirstOrThrow();
    if (pending.n >= p.maxPending) return undefined;
    const expires = sql<Date>`now() + ${`${p.ttlMs} milliseconds`}::interval`;
    const row = await trx
      .insertInto('channel_pairings')
      .values({
        agent_id: p.agentId,
        user_id: p.userId,
        kind: p.kind,
        code: p.code,
        sender_id: p.senderId,
        username: p.username ?? null,
        expires_at: expires,
      })
      .onConflict((oc) =>
        oc.columns(['agent_id', 'kind', 'sender_id']).doUpdateSet({ code: p.code, created_at: sql`now()`, expires_at: expires }),
      )
      .returning('code')
      .executeTakeFirstOrThrow();
    return row.code;
  },

  // --- the connections of a backend process (owner connection, every owner's channels) ---

  /**
   * Takes or renews the lease of every enabled channel that is free, lapsed or already `holder`'s,
   * and gives back the disabled ones it held. Returns the channels `holder` now runs.
   */
  async claim(db: Kysely<DB>, holder: string, leaseMs: number) {
    await db
      .updateTable('agent_channels')
      .set({ holder: null, lease_until: null })
      .where('holder', '=', holder)
      .where('enabled', '=', false)
      .execute();
    return db
      .updateTable('agent_channels')
      .set({ holder, lease_until: sql<Date>`now() + ${`${leaseMs} milliseconds`}::interval` })
      .where('enabled', '=', true)
      .where((eb) => eb.or([eb('holder', 'is', null), eb('holder', '=', holder), eb('lease_until', '<', sql<Date>`now()`)]))
      .returning(['agent_id', 'user_id', 'kind', 'token_enc', 'revision'])
      .execute();
  },

  /** An agent's channels with their sealed tokens, for a runtime that runs them itself (OpenClaw). */
  forRuntime(db: Kysely<DB>, agentId: string) {
    return db.selectFrom('agent_channels').select(['kind', 'token_enc', 'allow_from', 'enabled']).where('agent_id', '=', agentId).execute();
  },

  /** Gives back every lease of `holder` (a process stopping), so another process takes them at once. */
  async release(db: Kysely<DB>, holder: string) {
    await db.updateTable('agent_channels').set({ holder: null, lease_until: null }).where('holder', '=', holder).execute();
  },

  /** The status of one connection, unless the channel changed since (another revision) or another process holds it. */
  async setStatus(
    db: Kysely<DB>,
    c: { agentId: string; kind: ChannelKind; revision: number; holder: string },
    s: { status: 'connecting' | 'connected' | 'error'; error?: string | null; bot?: { id: string; username: string } },
  ) {
    await db
      .updateTable('agent_channels')
      .set({
        status: s.status,
        last_error: s.error ?? null,
        ...(s.bot ? { bot_id: s.bot.id, bot_username: s.bot.username } : {}),
      })
      .where('agent_id', '=', c.agentId)
      .where('kind', '=', c.kind)
      .where('revision', '=', c.revision)
      .where('holder', '=', c.holder)
      .execute();
  },
};
