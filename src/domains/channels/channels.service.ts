/**
 * The owner's side of an agent's messaging channels (docs/channels.md): connect a bot with its
 * token (checked with the provider first), the allow list, on and off, remove, approve a pairing
 * code, and what the Channels tab shows (status, recent senders, pending codes). Tokens are sealed
 * at rest (AES-256-GCM with SECRETS_ENCRYPTION_KEY, like the other channel secrets) and never
 * answered: the owner sees the last four characters and the bot's @name.
 */
import type { Db } from '../../db/client.ts';
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { ChannelProviders } from './channel-connections.service.ts';
import { normaliseAllowFrom, openClawChannel } from './channel-messages.rules.ts';
import { channelsRepo } from './channels.repo.ts';
import type { ChannelKind } from './connector.ts';

type PublicRow = Awaited<ReturnType<typeof channelsRepo.list>>[number];

const toChannel = (r: PublicRow) => ({
  kind: r.kind,
  bot: r.bot_username ? { id: r.bot_id ?? '', username: r.bot_username } : null,
  tokenHint: `••••${r.token_hint}`,
  allowFrom: r.allow_from,
  enabled: r.enabled,
  status: r.status,
  error: r.last_error,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

export type ChannelSettings = { botToken?: string | undefined; allowFrom?: string[] | undefined; enabled?: boolean | undefined };

export function createChannels(deps: {
  db: Db;
  secretsKey: Buffer;
  providers: ChannelProviders;
  /** a channel changed: the connections of this process look at once (the others within CHANNELS_SYNC_MS) */
  onChange?: () => void;
  /** Telegram updates posted to a bot's webhook (telegram.connector.ts) */
  telegramWebhook?: (path: string, secretHeader: string | undefined, update: unknown) => Promise<boolean>;
}) {
  const { db } = deps;

  async function ownAgent(userId: string, agentId: string) {
    if (!(await db.withUser(userId, (trx) => channelsRepo.agentExists(trx, agentId)))) throw notFound('Agent not found');
  }

  function provider(kind: ChannelKind) {
    const p = deps.providers[kind];
    if (!p) throw new AppError('SERVICE_UNAVAILABLE', `${kind} channels are not available on this platform`);
    return p;
  }

  /** The token checked with the provider (getMe), sealed for storage. */
  async function sealed(kind: ChannelKind, botToken: string) {
    const token = botToken.trim();
    const bot = await provider(kind).verify(token);
    return { enc: encryptSecret(deps.secretsKey, token), hint: token.slice(-4), botId: bot.id, botUsername: bot.username };
  }

  return {
    /** The agent's channels (no secrets), its recent senders and the pairing codes waiting for approval. */
    async list(userId: string, agentId: string) {
      await ownAgent(userId, agentId);
      return db.withUser(userId, async (trx) => {
        const [channels, senders, pairings] = await Promise.all([
          channelsRepo.list(trx, agentId),
          channelsRepo.recentSenders(trx, agentId, 50),
          channelsRepo.pendingPairings(trx, agentId),
        ]);
        return {
          channels: channels.map(toChannel),
          senders: senders.map((s) => ({
            kind: s.kind,
            id: s.sender_id,
            username: s.username,
            displayName: s.display_name,
            messages: s.messages,
            allowed: s.allowed,
            lastSeenAt: s.last_seen_at.toISOString(),
          })),
          pairings: pairings.map((p) => ({
            kind: p.kind,
            code: p.code,
            senderId: p.sender_id,
            username: p.username,
            createdAt: p.created_at.toISOString(),
            expiresAt: p.expires_at.toISOString(),
          })),
        };
      });
    },

    /**
     * Connects (or changes) one channel. A token is checked with the provider before anything is
     * stored; without a token only an existing channel's settings change.
     */
    async put(userId: string, agentId: string, kind: ChannelKind, s: ChannelSettings) {
      await ownAgent(userId, agentId);
      const token = s.botToken ? await sealed(kind, s.botToken) : undefined;
      const allowFrom = s.allowFrom && normaliseAllowFrom(s.allowFrom);
      const row = await db.withUser(userId, async (trx) => {
        const updated = await channelsRepo.update(trx, agentId, kind, {
          ...(token ? { token } : {}),
          ...(allowFrom ? { allowFrom } : {}),
          ...(s.enabled !== undefined ? { enabled: s.enabled } : {}),
        });
        if (updated) return updated;
        if (!token) throw badRequest(`botToken is required to connect ${kind}`);
        return channelsRepo.insert(trx, { agentId, userId, kind, token, allowFrom: allowFrom ?? [], enabled: s.enabled ?? true });
      });
      deps.onChange?.();
      return toChannel(row);
    },

    async remove(userId: string, agentId: string, kind: ChannelKind) {
      await ownAgent(userId, agentId);
      if (!(await db.withUser(userId, (trx) => channelsRepo.remove(trx, agentId, kind))))
        throw notFound(`No ${kind} channel on this agent`);
      deps.onChange?.();
      return { success: true as const };
    },

    /**
     * §4.18 POST /api/agents/provision with channel tokens (and PUT /api/agents/:id/config with
     * them): the tokens in `config.channels.telegram.botToken`
     * and `config.channels.discord.token` (or `botToken`) are checked with their providers now (a
     * refusal is a 400 before any agent exists) and taken out of the configuration; `save` stores
     * them as the agent's channels (new, or replacing the token of one it has), with that entry's
     * `allowFrom` and `enabled`.
     */
    async provisioning(config: Record<string, unknown>) {
      const channels = { ...(config.channels as Record<string, Record<string, unknown>> | undefined) };
      const found: { kind: ChannelKind; token: Awaited<ReturnType<typeof sealed>>; allowFrom: string[]; enabled: boolean }[] = [];
      for (const kind of ['telegram', 'discord'] as const) {
        const entry = channels[kind];
        const raw = entry?.botToken ?? entry?.token;
        // a masked value is what an answer showed of a secret stored in the configuration before: left as it is
        if (!entry || typeof raw !== 'string' || !raw.trim() || raw.startsWith('••••')) continue;
        const { botToken: _b, token: _t, ...rest } = entry;
        channels[kind] = rest;
        const allowFrom = Array.isArray(rest.allowFrom) ? normaliseAllowFrom(rest.allowFrom.map(String)) : [];
        found.push({ kind, token: await sealed(kind, raw), allowFrom, enabled: rest.enabled !== false });
      }
      return {
        config: found.length ? { ...config, channels } : config,
        save: async (userId: string, agentId: string) => {
          if (!found.length) return;
          await db.withUser(userId, async (trx) => {
            for (const f of found) {
              const { kind, ...settings } = f;
              if (!(await channelsRepo.update(trx, agentId, kind, settings))) await channelsRepo.insert(trx, { agentId, userId, ...f });
            }
          });
          deps.onChange?.();
        },
      };
    },

    /** The agent's channels as OpenClaw's `channels.*` (tokens in clear: OpenClaw runs the bots itself), or undefined without any. */
    async openClawChannels(agentId: string) {
      const rows = await channelsRepo.forRuntime(db.kysely, agentId);
      if (!rows.length) return undefined;
      return Object.fromEntries(
        rows.map((r) => [
          r.kind,
          openClawChannel({
            kind: r.kind,
            token: decryptSecret(deps.secretsKey, r.token_enc),
            allowFrom: r.allow_from,
            enabled: r.enabled,
          }),
        ]),
      );
    },

    /** An update Telegram posted to `/api/channels/telegram/<path>`: 404 unless it names a bot connected by webhook in this process. */
    async telegramUpdate(path: string, secretHeader: string | undefined, update: unknown) {
      if (!(await deps.telegramWebhook?.(path, secretHeader, update))) throw notFound();
      return { ok: true as const };
    },

    /** Approves a pairing code: its sender joins the allow list (OpenClaw's pairing; codes live an hour). */
    async approve(userId: string, agentId: string, kind: ChannelKind, code: string) {
      await ownAgent(userId, agentId);
      return db.withUser(userId, async (trx) => {
        const pairing = await channelsRepo.takePairing(trx, agentId, kind, code.trim().toUpperCase());
        if (!pairing) throw notFound('No such pairing code, or it has expired (codes live an hour)');
        await channelsRepo.allowSender(trx, agentId, kind, pairing.sender_id);
        return { success: true as const, senderId: pairing.sender_id, username: pairing.username };
      });
    },
  };
}

export type Channels = ReturnType<typeof createChannels>;
