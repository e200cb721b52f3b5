/**
 * Telegram through grammY (docs/channels.md "Telegram"), the Bot API library OpenClaw itself uses,
 * pointed at TELEGRAM_API_URL (`new Bot(token, { client: { apiRoot } })`) so tests drive it against
 * a local server speaking the Bot API. Long polling by default (`bot.start`: getMe, deleteWebhook,
 * then getUpdates); with `webhook` (PUBLIC_URL is https and this process serves the web app) the
 * bot registers `<baseUrl>/api/channels/telegram/<path>` with a secret token instead, and updates
 * arrive through `handleWebhook`. The path and the secret token are derived from the bot token
 * (SHA-256), so each agent's bot has its own unguessable address and the token itself never
 * appears in a URL the platform serves. grammY keeps the token out of its error messages.
 */
import { createHash } from 'node:crypto';
import { Bot, GrammyError, HttpError } from 'grammy';
import { safeEqual } from '../../lib/crypto.ts';
import { AppError } from '../../lib/errors.ts';
import {
  type BotIdentity,
  type ChannelConnector,
  type ChannelProvider,
  type ConnectOptions,
  type InboundMessage,
  MAX_MESSAGE_CHARS,
} from './connector.ts';

const derived = (token: string, purpose: string) => createHash('sha256').update(`${purpose}\n${token}`).digest('hex').slice(0, 40);

/** The webhook path segment of a bot (after /api/channels/telegram/). */
const webhookPath = (token: string) => derived(token, 'telegram-webhook-path');
const webhookSecret = (token: string) => derived(token, 'telegram-webhook-secret');

/** A refusal by Telegram (its own description, never the token) or an unreachable API, as the platform's errors. */
function providerError(err: unknown): AppError {
  if (err instanceof GrammyError)
    return new AppError('CHANNEL_TOKEN_REFUSED', `Telegram refused the bot token: ${err.description} (${err.error_code})`);
  const why = err instanceof HttpError ? 'the Bot API could not be reached' : 'the Bot API answered unexpectedly';
  return new AppError('CHANNEL_PROVIDER_UNREACHABLE', `Telegram could not be asked about the bot token: ${why}`);
}

export type TelegramProvider = ChannelProvider & {
  /**
   * An update Telegram posted to a bot's webhook: handled when `path` and the secret header name a
   * bot connected in this process (false otherwise: the route answers 404).
   */
  handleWebhook(path: string, secretHeader: string | undefined, update: unknown): Promise<boolean>;
};

export function createTelegramProvider(options: { apiUrl: string; webhook?: { baseUrl: string } | undefined }): TelegramProvider {
  const apiRoot = options.apiUrl.replace(/\/+$/, '');
  const newBot = (token: string) => new Bot(token, { client: { apiRoot } });
  // bots receiving by webhook in this process, by their path
  const hooked = new Map<string, { bot: Bot; secret: string }>();

  function connect(o: ConnectOptions): ChannelConnector {
    const bot = newBot(o.token);
    let stopped = false;
    let failed = false;
    const fail = (err: Error) => {
      if (stopped || failed) return;
      failed = true;
      o.onFailure?.(err);
    };
    // the middleware does not wait for the agent: one slow answer must not hold up every other chat of the bot
    bot.on('message:text', (ctx) => {
      const m = ctx.message;
      const message: InboundMessage = {
        chatId: String(m.chat.id),
        sender: {
          id: String(m.from.id),
          username: m.from.username,
          displayName: [m.from.first_name, m.from.last_name].filter(Boolean).join(' ') || undefined,
        },
        text: m.text,
        direct: m.chat.type === 'private',
      };
      o.onMessage(message).catch((err: unknown) => o.log.warn({ err, kind: 'telegram' }, 'telegram message not handled'));
    });
    bot.catch((err) => o.log.warn({ err: err.error, kind: 'telegram' }, 'telegram update failed'));
    const path = webhookPath(o.token);

    return {
      kind: 'telegram',
      async start(): Promise<BotIdentity> {
        try {
          await bot.init();
        } catch (err) {
          throw providerError(err);
        }
        const me = { id: String(bot.botInfo.id), username: bot.botInfo.username };
        if (options.webhook) {
          hooked.set(path, { bot, secret: webhookSecret(o.token) });
          await bot.api
            .setWebhook(`${options.webhook.baseUrl}/api/channels/telegram/${path}`, {
              secret_token: webhookSecret(o.token),
              allowed_updates: ['message'],
            })
            .catch((err: unknown) => {
              hooked.delete(path);
              throw providerError(err);
            });
          return me;
        }
        // long polling: start() resolves once deleteWebhook went through, the loop runs until stop()
        await new Promise<void>((resolve, reject) => {
          let started = false;
          bot
            .start({
              allowed_updates: ['message'],
              onStart: () => {
                started = true;
                resolve();
              },
            })
            .then(
              () => started && !stopped && fail(new Error('Telegram polling ended')),
              (err: unknown) => (started ? fail(providerError(err)) : reject(providerError(err))),
            );
        });
        return me;
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        if (hooked.get(path)?.bot === bot) {
          hooked.delete(path);
          // Telegram would go on posting to an address that now answers 404
          await bot.api.deleteWebhook().catch((err: unknown) => o.log.debug({ err }, 'telegram webhook not removed'));
        }
        if (bot.isRunning()) await bot.stop().catch((err: unknown) => o.log.debug({ err }, 'telegram stop: last offset not confirmed'));
      },
      async send(chatId, text) {
        await bot.api.sendMessage(chatId, text);
      },
      async typing(chatId) {
        await bot.api.sendChatAction(chatId, 'typing');
      },
    };
  }

  return {
    kind: 'telegram',
    maxMessageChars: MAX_MESSAGE_CHARS.telegram,
    async verify(token) {
      try {
        const me = await newBot(token).api.getMe();
        return { id: String(me.id), username: me.username };
      } catch (err) {
        throw providerError(err);
      }
    },
    connect,
    async handleWebhook(path, secretHeader, update) {
      const hook = hooked.get(path);
      if (!hook || !safeEqual(secretHeader ?? '', hook.secret)) return false;
      await hook.bot.handleUpdate(update as Parameters<Bot['handleUpdate']>[0]);
      return true;
    },
  };
}
