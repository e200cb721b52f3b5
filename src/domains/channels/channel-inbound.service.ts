/**
 * One message a bot received, from the provider to the agent and back (docs/channels.md
 * "Conversations"): the sender is recorded (recent senders), checked against the channel's
 * `allowFrom` before the model is ever called (§2: empty allows everyone), offered a pairing code
 * when not on the list, and otherwise the message goes into the sender's own session (§2
 * per-channel-peer) through the sessions domain, which reaches the agent the way chat does. The
 * typing indicator shows while the agent works; the reply is cut at the provider's limit.
 */
import { randomBytes } from 'node:crypto';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { isAppError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { Sessions } from '../sessions/index.ts';
import { pairingReply, peerSessionKey, senderAllowed, splitReply } from './channel-messages.rules.ts';
import { channelsRepo } from './channels.repo.ts';
import type { ChannelKind, InboundMessage } from './connector.ts';

/** Telegram's typing indicator lasts about 5 s (Discord's 10 s): sent again this often while the agent works. */
const TYPING_EVERY_MS = 4000;

// no 0/O or 1/I: a code is read out and typed by people
const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const newPairingCode = () => [...randomBytes(8)].map((b) => CODE_ALPHABET[b % CODE_ALPHABET.length]).join('');

const PAIRING_FULL = 'This agent only talks to people its owner allowed, and too many requests are waiting; please try again later.';

/** The channel a message came in on, and the way back to its chat. */
export type ChannelLink = {
  agentId: string;
  userId: string;
  kind: ChannelKind;
  maxMessageChars: number;
  send(chatId: string, text: string): Promise<void>;
  typing(chatId: string): Promise<void>;
};

export function createChannelInbound(deps: { db: Db; sessions: Pick<Sessions, 'converse'>; log: Logger }) {
  const { db, log } = deps;

  /** What a sender reads when the agent could not answer: the platform's sentence for a refusal, a generic one otherwise. */
  const failureText = (err: unknown) =>
    isAppError(err) && err.status < 500 && err.id !== 'NOT_FOUND'
      ? `The agent could not answer: ${err.message}`
      : 'The agent could not answer just now; please try again in a moment.';

  return async function handle(link: ChannelLink, m: InboundMessage): Promise<void> {
    const { agentId, userId, kind } = link;
    const settings = await db.withUser(userId, (trx) => channelsRepo.inboundSettings(trx, agentId, kind));
    if (!settings?.enabled) return;
    const allowed = senderAllowed(settings.allow_from, m.sender);
    await db.withUser(userId, (trx) =>
      channelsRepo.senderSeen(trx, {
        agentId,
        userId,
        kind,
        senderId: m.sender.id,
        username: m.sender.username,
        displayName: m.sender.displayName,
        allowed,
      }),
    );
    if (!allowed) {
      // a stranger in a group is ignored; one who writes directly is offered pairing (OpenClaw's dmPolicy `pairing`)
      if (!m.direct) return;
      const code = await db.withUser(userId, (trx) =>
        channelsRepo.pairingFor(trx, {
          agentId,
          userId,
          kind,
          senderId: m.sender.id,
          username: m.sender.username,
          code: newPairingCode(),
          ttlMs: LIMITS.channelPairingTtlMs,
          maxPending: LIMITS.channelPairingsPending,
        }),
      );
      await link.send(m.chatId, code ? pairingReply(code) : PAIRING_FULL);
      return;
    }
    const typing = () => void link.typing(m.chatId).catch((err: unknown) => log.debug({ err, agentId, kind }, 'typing indicator not sent'));
    typing();
    const timer = setInterval(typing, TYPING_EVERY_MS);
    let reply: string;
    try {
      const answer = await deps.sessions.converse(userId, agentId, { key: peerSessionKey(kind, m.sender.id), source: kind, text: m.text });
      reply = answer.reply.trim() || '(the agent gave an empty answer)';
    } catch (err) {
      if (!isAppError(err) || err.status >= 500) log.warn({ err, agentId, kind }, 'channel message not answered');
      reply = failureText(err);
    } finally {
      clearInterval(timer);
    }
    for (const piece of splitReply(reply, link.maxMessageChars)) await link.send(m.chatId, piece);
  };
}

export type ChannelInbound = ReturnType<typeof createChannelInbound>;
