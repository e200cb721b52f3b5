/**
 * The messaging providers of this platform, one per channel kind (docs/architecture.md rule 4: a
 * `Record<Kind, …>`, so a kind left unwired shows here), each pointed at its API base setting.
 *
 * Each provider's library (grammY; @discordjs/core, rest and ws with an undici of their own) is
 * imported when a channel first needs it: a token checked, a bot connected. An install without
 * channels never loads them, and they are ~10 MB of the platform's idle memory
 * (docs/benchmarks.md "Memory").
 */
import type { ChannelProviders } from './channel-connections.service.ts';
import { type ChannelConnector, type ChannelKind, type ChannelProvider, MAX_MESSAGE_CHARS } from './connector.ts';
import type { TelegramProvider } from './telegram.connector.ts';

/** A provider whose library is imported on its first use. */
function deferred<P extends ChannelProvider>(kind: ChannelKind, load: () => Promise<P>): ChannelProvider {
  return {
    kind,
    maxMessageChars: MAX_MESSAGE_CHARS[kind],
    verify: (token) => load().then((p) => p.verify(token)),
    connect(options): ChannelConnector {
      const opened = load().then((p) => p.connect(options));
      return {
        kind,
        start: () => opened.then((c) => c.start()),
        // a connection whose library never loaded has nothing to stop
        stop: () =>
          opened.then(
            (c) => c.stop(),
            () => undefined,
          ),
        send: (chatId, text) => opened.then((c) => c.send(chatId, text)),
        typing: (chatId) => opened.then((c) => c.typing(chatId)),
      };
    },
  };
}

export function createChannelProviders(o: {
  telegramApiUrl: string;
  discordApiUrl: string;
  discordGatewayUrl: string;
  /** receive Telegram updates by webhook at this public https base instead of long polling */
  webhookBaseUrl?: string | undefined;
}) {
  let telegramLoaded: TelegramProvider | undefined;
  let telegramLoading: Promise<TelegramProvider> | undefined;
  let discordLoading: Promise<ChannelProvider> | undefined;
  const loadTelegram = () =>
    (telegramLoading ??= import('./telegram.connector.ts').then(({ createTelegramProvider }) => {
      telegramLoaded = createTelegramProvider({
        apiUrl: o.telegramApiUrl,
        webhook: o.webhookBaseUrl ? { baseUrl: o.webhookBaseUrl } : undefined,
      });
      return telegramLoaded;
    }));
  const loadDiscord = () =>
    (discordLoading ??= import('./discord.connector.ts').then(({ createDiscordProvider }) =>
      createDiscordProvider({ apiUrl: o.discordApiUrl, gatewayUrl: o.discordGatewayUrl }),
    ));
  const telegram: Pick<TelegramProvider, 'handleWebhook'> = {
    // no bot connected in this process before grammY is loaded: the route answers 404
    handleWebhook: (path, secret, update) => telegramLoaded?.handleWebhook(path, secret, update) ?? Promise.resolve(false),
  };
  const providers: ChannelProviders = { telegram: deferred('telegram', loadTelegram), discord: deferred('discord', loadDiscord) };
  return { providers, telegram };
}
