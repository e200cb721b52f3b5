/**
 * Conversations (docs/channels.md): the sessions the platform keeps (the dashboard's, each channel
 * peer's), the owner's API over messaging channels (web app) and the bot connections (backend
 * processes, `start`). Telegram receives by webhook only where this process
 * also serves the web app and PUBLIC_URL is https (Telegram posts to the public address, and the
 * bot that handles the update must live in the process that receives it); elsewhere bots long-poll.
 */
import type { Config } from '../config/env.ts';
import { LIMITS } from '../config/limits.ts';
import type { Db } from '../db/client.ts';
import type { AgentClient, AgentMessages } from '../domains/agents/index.ts';
import type { ChannelConnections } from '../domains/channels/index.ts';
import { createChannelConnections, createChannelInbound, createChannelProviders, createChannels } from '../domains/channels/index.ts';
import type { ChatService } from '../domains/chat/index.ts';
import { createSessions } from '../domains/sessions/index.ts';
import type { Logger } from '../lib/logger.ts';

export function createConversations(deps: {
  config: Config;
  db: Db;
  secrets: { secretsEncryptionKey: Buffer };
  chat: ChatService;
  agentClient: AgentClient;
  messages: AgentMessages;
  log: Logger;
}) {
  const { config, db, log } = deps;
  const secretsKey = deps.secrets.secretsEncryptionKey;
  // OpenClaw runs its channels itself: the platform's settings become its configuration and no connection runs here
  const openClaw = config.HOSTING_DRIVER === 'local' && config.AGENT_RUNTIME === 'openclaw';
  // sessions reach the agent as chat does (its `open`), and store their turns where chat does
  const sessions = createSessions({
    db,
    open: (userId, agentId) => deps.chat.open(userId, agentId),
    agentClient: deps.agentClient,
    messages: deps.messages,
  });
  const urls = {
    telegramApiUrl: config.TELEGRAM_API_URL,
    discordApiUrl: config.DISCORD_API_URL,
    discordGatewayUrl: config.DISCORD_GATEWAY_URL,
  };
  let connections: ChannelConnections | undefined;
  let received: ReturnType<typeof createChannelProviders>['telegram'] | undefined;
  const channels = createChannels({
    db,
    secretsKey,
    providers: createChannelProviders(urls).providers,
    onChange: () => connections?.nudge(),
    telegramWebhook: (path, secret, update) => received?.handleWebhook(path, secret, update) ?? Promise.resolve(false),
  });
  return {
    /** what the web app serves: the dashboard's session behind POST /api/chat, the channels API */
    web: { sessions, channels },
    /** §4.18 provisioning with channel tokens (the agents domain's `channelTokens`) */
    channelTokens: (agentConfig: Record<string, unknown>) => channels.provisioning(agentConfig),
    /** what a deploy adds to the agent's configuration: its channels, for OpenClaw only */
    runtimeChannels: async (agentId: string) => (openClaw ? channels.openClawChannels(agentId) : undefined),
    /** Starts this backend process's bot connections (docs/channels.md "Connections"); `servesWeb`: the web app listens in this process too. */
    async start(o: { servesWeb: boolean }) {
      if (connections || openClaw) return;
      const { providers, telegram } = createChannelProviders({
        ...urls,
        webhookBaseUrl: o.servesWeb && config.secureCookies ? config.PUBLIC_URL : undefined,
      });
      received = telegram;
      connections = createChannelConnections({
        db,
        secretsKey,
        providers,
        inbound: createChannelInbound({ db, sessions, log }),
        log,
        syncMs: LIMITS.channelSyncMs,
      });
      await connections.start();
    },
    async stop() {
      await connections?.stop();
    },
  };
}
