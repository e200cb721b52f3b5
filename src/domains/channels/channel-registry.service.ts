/**
 * The messaging providers of this platform, one per channel kind (docs/architecture.md rule 4: a
 * `Record<Kind, …>`, so a kind left unwired shows here), each pointed at its API base setting.
 */
import type { ChannelProviders } from './channel-connections.service.ts';
import { createDiscordProvider } from './discord.connector.ts';
import { createTelegramProvider } from './telegram.connector.ts';

export function createChannelProviders(o: {
  telegramApiUrl: string;
  discordApiUrl: string;
  discordGatewayUrl: string;
  /** receive Telegram updates by webhook at this public https base instead of long polling */
  webhookBaseUrl?: string | undefined;
}) {
  const telegram = createTelegramProvider({
    apiUrl: o.telegramApiUrl,
    webhook: o.webhookBaseUrl ? { baseUrl: o.webhookBaseUrl } : undefined,
  });
  const providers: ChannelProviders = {
    telegram,
    discord: createDiscordProvider({ apiUrl: o.discordApiUrl, gatewayUrl: o.discordGatewayUrl }),
  };
  return { providers, telegram };
}
