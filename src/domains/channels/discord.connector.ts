/**
 * Discord over @discordjs/core: REST (@discordjs/rest) for the bot's identity, messages and the
 * typing indicator, one gateway connection (@discordjs/ws) for inbound messages. Both bases are
 * settings (DISCORD_API_URL, DISCORD_GATEWAY_URL) so tests run the real libraries against
 * test/fakes/discord-api.ts. The contract is ./connector.ts.
 */
import {
  API,
  Client,
  GatewayDispatchEvents,
  GatewayIntentBits,
  type GatewayMessageCreateDispatchData,
  type ToEventProps,
} from '@discordjs/core';
import { DiscordAPIError, REST } from '@discordjs/rest';
import {
  type CreateWebSocketManagerOptions,
  type SessionInfo,
  SimpleShardingStrategy,
  WebSocketManager,
  type WebSocketShard,
  WebSocketShardEvents,
} from '@discordjs/ws';
import { WebSocket } from 'ws';
import { AppError } from '../../lib/errors.ts';
import { type BotIdentity, type ChannelConnector, type ChannelProvider, type ConnectOptions, MAX_MESSAGE_CHARS } from './connector.ts';

/**
 * Server messages, direct messages, and their text: Message Content is a privileged intent, so a
 * bot without it switched on in the Developer Portal is refused at IDENTIFY (close code 4014).
 */
const INTENTS = GatewayIntentBits.GuildMessages | GatewayIntentBits.DirectMessages | GatewayIntentBits.MessageContent;

/** How long start() waits for READY before giving up (Discord answers in about a second). */
const DEFAULT_START_TIMEOUT_MS = 30_000;

export type DiscordProviderOptions = {
  /** DISCORD_API_URL, the REST base without the version (`https://discord.com/api`) */
  apiUrl: string;
  /** DISCORD_GATEWAY_URL (`wss://gateway.discord.gg`) */
  gatewayUrl: string;
  /** how long start() waits for the gateway's READY */
  startTimeoutMs?: number;
};

/**
 * @discordjs/ws connects to the URL that `GET /gateway/bot` names; this one connects to the
 * configured gateway instead and keeps the rest of that answer (shard count, session limits).
 */
class ConfiguredGatewayManager extends WebSocketManager {
  readonly #url: string;

  constructor(url: string, options: CreateWebSocketManagerOptions) {
    super(options);
    this.#url = url;
  }

  override async fetchGatewayInformation(force?: boolean) {
    return { ...(await super.fetchGatewayInformation(force)), url: this.#url };
  }
}

/** How long a closing gateway socket may wait for Discord's close frame before it is cut. */
const CLOSE_WAIT_MS = 5_000;

/**
 * Ends a gateway connection for good, where WebSocketManager.destroy() alone does not (@discordjs/ws
 * 2.0): destroy() waits forever when the library destroys the same shard itself at that moment (it
 * does when destroy() aborts a wait for HELLO or READY), and a socket still in its opening handshake
 * is left open without an error listener, so a handshake that fails later throws out of `ws` as an
 * uncaught exception. So this waits for the sockets themselves to close. (Reconnections the library
 * schedules on its own are stopped by the connection's session store.)
 */
async function destroyGateway(manager: WebSocketManager, strategy: SimpleShardingStrategy | undefined) {
  // both private in the library's types: read only to see every socket closed
  const shards = [...((strategy as unknown as { shards?: Map<number, WebSocketShard> } | undefined)?.shards?.values() ?? [])];
  const sockets = shards.flatMap((shard) => (shard as unknown as { connection: WebSocket | null }).connection ?? []);
  Promise.resolve(manager.destroy()).catch(() => {});
  await Promise.all(sockets.map(closed));
}

function closed(socket: WebSocket): Promise<void> | undefined {
  if (socket.readyState === WebSocket.CLOSED) return;
  return new Promise((resolve) => {
    const cut = setTimeout(() => socket.terminate(), CLOSE_WAIT_MS);
    socket.once('close', () => {
      clearTimeout(cut);
      resolve();
    });
    socket.on('error', () => {});
    // destroy() closes an open socket itself; one still connecting has its handshake aborted here
    if (socket.readyState === WebSocket.CONNECTING) socket.close();
  });
}

/** The token never appears in a sentence, even where a library quotes a header or a URL. */
const redact = (reason: string, token: string) => (token ? reason.replaceAll(token, '[token]') : reason);

const refused = (reason: string, token: string) =>
  new AppError('CHANNEL_TOKEN_REFUSED', `Discord refused the bot token: ${redact(reason, token)}`);

const unreachable = (reason: string, token: string) =>
  new AppError('CHANNEL_PROVIDER_UNREACHABLE', `Discord could not be reached: ${redact(reason, token)}`);

/**
 * A REST failure as the contract names it: 401 is the token refused; another Discord answer
 * (a missing permission, an unknown channel) is passed on; anything else (a network error,
 * a timeout, a 5xx after the library's retries) is Discord unreachable.
 */
function restError(err: unknown, token: string): unknown {
  if (err instanceof DiscordAPIError) return err.status === 401 ? refused(err.message, token) : err;
  if (err instanceof AppError) return err;
  return unreachable(err instanceof Error ? err.message : String(err), token);
}

/** A gateway close the library gives up on (it reconnects by itself on every other one). */
function gatewayError(err: Error, token: string): AppError {
  if (err.message === 'Authentication failed') return refused('the gateway answered "Authentication failed"', token);
  if (err.message === 'Used disallowed intents')
    return refused('this bot may not read message content; switch on its Message Content intent in the Discord Developer Portal', token);
  return unreachable(`the gateway closed the connection (${err.message})`, token);
}

export function createDiscordProvider({
  apiUrl,
  gatewayUrl,
  startTimeoutMs = DEFAULT_START_TIMEOUT_MS,
}: DiscordProviderOptions): ChannelProvider {
  const rest = (token: string) => new REST({ version: '10', api: apiUrl }).setToken(token);

  async function verify(token: string): Promise<BotIdentity> {
    const client = rest(token);
    try {
      const user = await new API(client).users.getCurrent();
      return { id: user.id, username: user.username };
    } catch (err) {
      const error = restError(err, token);
      // any other answer to `GET /users/@me` means DISCORD_API_URL is not Discord's API
      throw error instanceof DiscordAPIError ? unreachable(`${error.status} ${error.message}`, token) : error;
    } finally {
      client.clearHashSweeper();
      client.clearHandlerSweeper();
    }
  }

  function connect({ token, onMessage, onFailure, log }: ConnectOptions): ChannelConnector {
    const client = rest(token);
    const api = new API(client);
    /** per connection: the library's default session store is one per process, shared by every bot */
    const sessions = new Map<number, SessionInfo>();
    let gateway: { manager: WebSocketManager; strategy: () => SimpleShardingStrategy | undefined } | undefined;
    let stopping: Promise<void> | undefined;
    /** onFailure is called once per connection */
    let reportedFailure = false;
    let failStart: ((err: unknown) => void) | undefined;

    async function receive({ data }: ToEventProps<GatewayMessageCreateDispatchData>) {
      if (stopping || data.author.bot || !data.content) return;
      try {
        await onMessage({
          chatId: data.channel_id,
          sender: { id: data.author.id, username: data.author.username, displayName: data.author.global_name ?? undefined },
          text: data.content,
          direct: !data.guild_id,
        });
      } catch (err) {
        log.error({ err, chatId: data.channel_id }, 'discord: an inbound message was not handled');
      }
    }

    async function start(): Promise<BotIdentity> {
      if (stopping) throw new Error('This Discord connection was stopped');
      if (gateway) throw new Error('This Discord connection was already started');
      let strategy: SimpleShardingStrategy | undefined;
      const manager = new ConfiguredGatewayManager(gatewayUrl, {
        token,
        intents: INTENTS,
        rest: client,
        buildStrategy: (m) => {
          strategy = new SimpleShardingStrategy(m);
          return strategy;
        },
        // every (re)connection asks for its session first: once stopped, that question is never
        // answered, so a reconnection the library had already scheduled opens no socket
        retrieveSessionInfo: (shardId) => (stopping ? new Promise<never>(() => {}) : (sessions.get(shardId) ?? null)),
        updateSessionInfo: (shardId, info) => {
          if (info) sessions.set(shardId, info);
          else sessions.delete(shardId);
        },
      });
      gateway = { manager, strategy: () => strategy };
      let bot: BotIdentity | undefined;
      manager.on(WebSocketShardEvents.Ready, (data) => {
        bot = { id: data.user.id, username: data.user.username };
      });
      manager.on(WebSocketShardEvents.Debug, (message, shardId) => log.debug({ shardId }, `discord gateway: ${message}`));
      // without a listener the library's emitter throws the error out of its socket handler
      manager.on(WebSocketShardEvents.Error, (err, shardId) => {
        const error = gatewayError(err, token);
        if (failStart) failStart(error);
        else {
          // the library raises this for what it does not recover from (a reset token, a revoked
          // intent): the channel service is told, records the error and connects again later
          log.error({ err: error, shardId }, 'discord: the gateway connection stopped');
          if (!reportedFailure && !stopping) {
            reportedFailure = true;
            onFailure?.(error);
          }
        }
      });
      new Client({ rest: client, gateway: manager }).on(GatewayDispatchEvents.MessageCreate, receive);

      const failed = new Promise<never>((_, reject) => {
        failStart = reject;
      });
      const timer = setTimeout(
        () => failStart?.(unreachable(`the gateway sent no READY within ${Math.round(startTimeoutMs / 1000)} seconds`, token)),
        startTimeoutMs,
      );
      // `GET /gateway/bot` first: a refused token or an unreachable API fails here
      const connected = manager.connect().catch((err: unknown) => Promise.reject(restError(err, token)));
      // whichever loses the race settles later with nobody listening
      failed.catch(() => {});
      connected.catch(() => {});
      try {
        await Promise.race([connected, failed]);
      } catch (err) {
        failStart = undefined;
        await stop();
        throw err;
      } finally {
        clearTimeout(timer);
        failStart = undefined;
      }
      if (!bot) throw new Error('The Discord gateway connected without a READY');
      log.info({ botId: bot.id }, 'discord: connected');
      return bot;
    }

    function stop(): Promise<void> {
      stopping ??= (async () => {
        failStart?.(new Error('This Discord connection was stopped while starting'));
        if (gateway) await destroyGateway(gateway.manager, gateway.strategy());
        client.clearHashSweeper();
        client.clearHandlerSweeper();
      })();
      return stopping;
    }

    async function call(request: () => Promise<unknown>) {
      // @discordjs/rest forgets the token after a 401: a later call is then refused by Discord, not by the library
      client.setToken(token);
      try {
        await request();
      } catch (err) {
        throw restError(err, token);
      }
    }

    return {
      kind: 'discord',
      start,
      stop,
      // an agent's reply never pings @everyone, a role or a user
      send: (chatId, text) => call(() => api.channels.createMessage(chatId, { content: text, allowed_mentions: { parse: [] } })),
      typing: (chatId) => call(() => api.channels.showTyping(chatId)),
    };
  }

  return { kind: 'discord', maxMessageChars: MAX_MESSAGE_CHARS.discord, verify, connect };
}
