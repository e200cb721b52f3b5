/**
 * The contract between the platform's channel service and one messaging provider (docs/channels.md):
 * the platform, not the agent, holds each bot token and runs its connection, so a token never
 * enters an agent's sandbox. One factory per provider (`telegram.connector.ts` over
 * grammY, `discord.connector.ts` over @discordjs/core), each with its API base as a setting
 * (TELEGRAM_API_URL, DISCORD_API_URL, DISCORD_GATEWAY_URL) so tests drive the real libraries
 * against protocol-level fakes. Splitting long replies, allow lists, sessions and pairing are the
 * channel service's; a connector only speaks its provider's protocol.
 */
import type { Logger } from '../../lib/logger.ts';

export type ChannelKind = 'telegram' | 'discord';

/** Each provider's limit for one message, in characters (Telegram's Bot API 4096, Discord 2000). */
export const MAX_MESSAGE_CHARS: Record<ChannelKind, number> = { telegram: 4096, discord: 2000 };

/** A text message a bot received. */
export type InboundMessage = {
  /** where to answer: a Telegram chat id, a Discord channel id */
  chatId: string;
  /** who sent it: the provider's user id, and the @name when the provider has one (without `@`) */
  sender: { id: string; username?: string | undefined; displayName?: string | undefined };
  text: string;
  /** a direct message (true) or a group, supergroup or guild channel (false) */
  direct: boolean;
};

/** The bot a token belongs to, as the provider reports it (Telegram `getMe`, Discord `GET /users/@me`). */
export type BotIdentity = { id: string; username: string };

export type ConnectOptions = {
  token: string;
  /** called once per inbound text message; a rejection is logged by the connector and never stops it */
  onMessage: (message: InboundMessage) => Promise<void>;
  /**
   * called at most once when a started connection ends on its own (the provider revoked the token,
   * another poller took the bot): the channel service records the error and connects again later
   */
  onFailure?: (err: Error) => void;
  log: Logger;
};

/** One running bot connection. */
export interface ChannelConnector {
  readonly kind: ChannelKind;
  /** start receiving (long polling, a webhook or a gateway socket); resolves with the bot once connected */
  start(): Promise<BotIdentity>;
  /** stop receiving and close every socket; idempotent */
  stop(): Promise<void>;
  /** sends one message of at most `maxMessageChars` characters */
  send(chatId: string, text: string): Promise<void>;
  /** shows the provider's typing indicator in that chat */
  typing(chatId: string): Promise<void>;
}

/** A provider: checks a token and opens connections with it. */
export interface ChannelProvider {
  readonly kind: ChannelKind;
  /** the provider's limit for one message (Telegram 4096, Discord 2000 characters) */
  readonly maxMessageChars: number;
  /**
   * Asks the provider who the token belongs to; throws AppError `CHANNEL_TOKEN_REFUSED` (400, with
   * the provider's own reason in the sentence, never the token) when the provider refuses it, and
   * `CHANNEL_PROVIDER_UNREACHABLE` (502) when it cannot be reached.
   */
  verify(token: string): Promise<BotIdentity>;
  connect(options: ConnectOptions): ChannelConnector;
}
