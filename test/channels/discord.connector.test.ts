/**
 * The Discord connector driving the real @discordjs/{rest,ws,core} against a local Discord that
 * speaks its REST and gateway protocols (test/fakes/discord-api.ts).
 */
import { createServer, type Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChannelConnector, InboundMessage } from '../../src/domains/channels/connector.ts';
import { createDiscordProvider } from '../../src/domains/channels/discord.connector.ts';
import { AppError } from '../../src/lib/errors.ts';
import type { Logger } from '../../src/lib/logger.ts';
import { type FakeDiscord, startFakeDiscord } from '../fakes/discord-api.ts';

const TOKEN = 'MTI3NjU0MzIxMDk4NzY1NDMyMQ.GaBcDe.bot-token-for-tests';

let discord: FakeDiscord;
let provider: ReturnType<typeof createDiscordProvider>;
const running: ChannelConnector[] = [];

beforeAll(async () => {
  // a short heartbeat interval so heartbeats and their ACKs happen during the tests
  discord = await startFakeDiscord({ token: TOKEN, heartbeatInterval: 200 });
  provider = createDiscordProvider({ apiUrl: discord.apiUrl, gatewayUrl: discord.gatewayUrl });
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop()));
});
afterAll(() => discord.close());

const recordingLogger = () => {
  const errors: { fields: object; msg: string | undefined }[] = [];
  const nothing = () => {};
  const log: Logger = {
    debug: nothing,
    info: nothing,
    warn: nothing,
    error: (fields: object | string, msg?: string) => {
      if (typeof fields === 'string') errors.push({ fields: {}, msg: fields });
      else errors.push({ fields, msg });
    },
  };
  return { log, errors };
};

function connect(onMessage: (m: InboundMessage) => Promise<void>, log: Logger = recordingLogger().log) {
  const connector = provider.connect({ token: TOKEN, onMessage, log });
  running.push(connector);
  return connector;
}

const human = { id: '1100000000000000001', username: 'ada', global_name: 'Ada Lovelace' };

describe('discord provider', () => {
  it('names its kind and Discord limit', () => {
    expect(provider.kind).toBe('discord');
    expect(provider.maxMessageChars).toBe(2000);
  });

  it('verify returns the bot a token belongs to', async () => {
    await expect(provider.verify(TOKEN)).resolves.toEqual({ id: discord.bot.id, username: 'platform-bot' });
  });

  it("verify refuses a wrong token with Discord's reason and never the token", async () => {
    const wrong = 'MTI3NjU0MzIxMDk4NzY1NDMyMQ.XyZ.wrong-token';
    const err = await provider.verify(wrong).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ id: 'CHANNEL_TOKEN_REFUSED', status: 400, code: 'CHANNEL_TOKEN_REFUSED' });
    expect((err as AppError).message).toContain('401: Unauthorized');
    expect((err as AppError).message).not.toContain(wrong);
  });

  it('verify reports an unreachable Discord as CHANNEL_PROVIDER_UNREACHABLE', async () => {
    const down = await startFakeDiscord({ token: TOKEN });
    await down.close();
    const offline = createDiscordProvider({ apiUrl: down.apiUrl, gatewayUrl: down.gatewayUrl });
    await expect(offline.verify(TOKEN)).rejects.toMatchObject({ id: 'CHANNEL_PROVIDER_UNREACHABLE', status: 502 });
  });
});

describe('discord connector', () => {
  it('starts on the configured gateway with JSON, no compression and the message intents', async () => {
    const connector = connect(async () => {});
    await expect(connector.start()).resolves.toEqual({ id: discord.bot.id, username: 'platform-bot' });
    const identify = discord.identifies.at(-1);
    expect(identify?.query).toBe('v=10&encoding=json');
    // GUILD_MESSAGES (1 << 9) | DIRECT_MESSAGES (1 << 12) | MESSAGE_CONTENT (1 << 15)
    expect(identify?.intents).toBe((1 << 9) | (1 << 12) | (1 << 15));
  });

  it('hands a guild message and a direct message to onMessage', async () => {
    const received: InboundMessage[] = [];
    await connect(async (m) => {
      received.push(m);
    }).start();
    expect(
      discord.deliver({ channelId: '2200000000000000001', guildId: '3300000000000000001', author: human, content: 'hello there' }),
    ).toBe(1);
    discord.deliver({ channelId: '2200000000000000002', author: { id: '1100000000000000002', username: 'bob' }, content: 'psst' });
    await vi.waitFor(() => expect(received).toHaveLength(2));
    expect(received).toEqual([
      {
        chatId: '2200000000000000001',
        sender: { id: human.id, username: 'ada', displayName: 'Ada Lovelace' },
        text: 'hello there',
        direct: false,
      },
      {
        chatId: '2200000000000000002',
        sender: { id: '1100000000000000002', username: 'bob', displayName: undefined },
        text: 'psst',
        direct: true,
      },
    ]);
  });

  it('ignores bots (its own messages included) and messages without text', async () => {
    const received: InboundMessage[] = [];
    await connect(async (m) => {
      received.push(m);
    }).start();
    discord.deliver({
      channelId: '2200000000000000001',
      author: { id: discord.bot.id, username: 'platform-bot', bot: true },
      content: 'my own reply',
    });
    discord.deliver({
      channelId: '2200000000000000001',
      author: { id: '1100000000000000009', username: 'other-bot', bot: true },
      content: 'beep',
    });
    discord.deliver({ channelId: '2200000000000000001', author: human, content: '' });
    discord.deliver({ channelId: '2200000000000000001', author: human, content: 'after them' });
    await vi.waitFor(() => expect(received).toHaveLength(1));
    expect(received[0]?.text).toBe('after them');
  });

  it('sends messages without pinging anyone and shows typing', async () => {
    const connector = connect(async () => {});
    await connector.start();
    await connector.send('2200000000000000001', 'hi @everyone');
    await connector.typing('2200000000000000001');
    expect(discord.sent.at(-1)).toEqual({ channelId: '2200000000000000001', content: 'hi @everyone', allowedMentions: { parse: [] } });
    expect(discord.typing.at(-1)).toBe('2200000000000000001');
  });

  it('passes on what Discord refuses in a send', async () => {
    const connector = connect(async () => {});
    await expect(connector.send('2200000000000000001', 'x'.repeat(2001))).rejects.toThrow(/2000 or fewer/);
  });

  it('a send with a refused token is CHANNEL_TOKEN_REFUSED, every time', async () => {
    const revoked = provider.connect({ token: 'revoked', onMessage: async () => {}, log: recordingLogger().log });
    running.push(revoked);
    await expect(revoked.send('2200000000000000001', 'hi')).rejects.toMatchObject({ id: 'CHANNEL_TOKEN_REFUSED' });
    await expect(revoked.typing('2200000000000000001')).rejects.toMatchObject({ id: 'CHANNEL_TOKEN_REFUSED' });
  });

  it('logs a failing onMessage once and keeps receiving', async () => {
    const { log, errors } = recordingLogger();
    const received: string[] = [];
    await connect(async (m) => {
      if (m.text === 'boom') throw new Error('the agent fell over');
      received.push(m.text);
    }, log).start();
    discord.deliver({ channelId: '2200000000000000001', author: human, content: 'boom' });
    discord.deliver({ channelId: '2200000000000000001', author: human, content: 'still there?' });
    await vi.waitFor(() => expect(received).toEqual(['still there?']));
    expect(errors).toHaveLength(1);
    expect(errors[0]?.fields).toMatchObject({ err: { message: 'the agent fell over' }, chatId: '2200000000000000001' });
  });

  it('hands on a message while an earlier one is still being handled', async () => {
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const seen: string[] = [];
    await connect(async (m) => {
      seen.push(m.text);
      if (m.text === 'slow') await held;
    }).start();
    discord.deliver({ channelId: '2200000000000000001', author: human, content: 'slow' });
    discord.deliver({ channelId: '2200000000000000002', author: human, content: 'quick' });
    await vi.waitFor(() => expect(seen).toEqual(['slow', 'quick']));
    release();
  });

  it('answers the heartbeat protocol', async () => {
    const before = discord.heartbeats;
    await connect(async () => {}).start();
    await vi.waitFor(() => expect(discord.heartbeats).toBeGreaterThan(before + 1));
  });

  it('stop closes the gateway socket with 1000 and is idempotent', async () => {
    const received: InboundMessage[] = [];
    const connector = connect(async (m) => {
      received.push(m);
    });
    await connector.start();
    expect(discord.openSockets).toBe(1);
    const closes = discord.closes.length;
    await Promise.all([connector.stop(), connector.stop()]);
    await connector.stop();
    await vi.waitFor(() => expect(discord.openSockets).toBe(0));
    expect(discord.closes.slice(closes)).toEqual([1000]);
    expect(discord.deliver({ channelId: '2200000000000000001', author: human, content: 'anyone?' })).toBe(0);
    expect(received).toEqual([]);
  });

  it('two bots in one process keep their own sessions', async () => {
    const received: string[][] = [[], []];
    const first = connect(async (m) => {
      received[0]?.push(m.text);
    });
    const second = connect(async (m) => {
      received[1]?.push(m.text);
    });
    await Promise.all([first.start(), second.start()]);
    expect(discord.openSockets).toBe(2);
    expect(discord.deliver({ channelId: '2200000000000000001', author: human, content: 'both' })).toBe(2);
    await vi.waitFor(() => expect(received).toEqual([['both'], ['both']]));
  });

  it('start refuses a wrong token before opening the gateway', async () => {
    const sockets = discord.identifies.length;
    const connector = provider.connect({ token: 'wrong', onMessage: async () => {}, log: recordingLogger().log });
    running.push(connector);
    await expect(connector.start()).rejects.toMatchObject({ id: 'CHANNEL_TOKEN_REFUSED' });
    expect(discord.identifies.length).toBe(sockets);
  });

  it('start explains a bot whose Message Content intent is off', async () => {
    const strict = await startFakeDiscord({ token: TOKEN, messageContentIntent: false });
    try {
      const connector = createDiscordProvider({ apiUrl: strict.apiUrl, gatewayUrl: strict.gatewayUrl }).connect({
        token: TOKEN,
        onMessage: async () => {},
        log: recordingLogger().log,
      });
      running.push(connector);
      const err = await connector.start().catch((e: unknown) => e);
      expect(err).toMatchObject({ id: 'CHANNEL_TOKEN_REFUSED', status: 400 });
      expect((err as AppError).message).toMatch(/Message Content intent/);
      await vi.waitFor(() => expect(strict.openSockets).toBe(0));
    } finally {
      await strict.close();
    }
  });

  it('resumes its session when the gateway drops the socket, and keeps receiving', async () => {
    const received: string[] = [];
    await connect(async (m) => {
      received.push(m.text);
    }).start();
    const resumes = discord.resumes;
    discord.drop(4000);
    // the library waits a fixed 500 ms before it reconnects
    await vi.waitFor(() => expect(discord.resumes).toBe(resumes + 1), { timeout: 3000 });
    expect(discord.deliver({ channelId: '2200000000000000001', author: human, content: 'welcome back' })).toBe(1);
    await vi.waitFor(() => expect(received).toEqual(['welcome back']));
  });
});

/** A TCP port that accepts gateway connections and answers nothing: counts them, cuts each after `cutAfterMs`. */
async function silentGateway(cutAfterMs: number) {
  const state = { connections: 0, url: '', server: undefined as Server | undefined };
  const server = createServer((socket) => {
    state.connections += 1;
    setTimeout(() => socket.destroy(), cutAfterMs);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/gateway`;
  state.server = server;
  return state;
}

/**
 * @discordjs/ws 2.0 alone would reconnect after being destroyed, leave a socket in its opening
 * handshake open (and throw an uncaught exception when that handshake fails), or never finish
 * destroy(): each case here failed before the connector worked around it.
 */
describe('discord connector stopping at awkward moments', () => {
  it('stop while start waits for the gateway: start rejects and nothing connects afterwards', async () => {
    const identifies = discord.identifies.length;
    const connector = connect(async () => {});
    const started = connector.start().catch((e: unknown) => e);
    await connector.stop();
    expect(await started).toBeInstanceOf(Error);
    // past the library's 500 ms wait before a reconnection
    await sleep(700);
    expect(discord.openSockets).toBe(0);
    expect(discord.identifies.length).toBe(identifies);
  });

  it('stop while waiting for READY ends the socket', async () => {
    const connector = connect(async () => {});
    const started = connector.start().catch((e: unknown) => e);
    await vi.waitFor(() => expect(discord.openSockets).toBe(1));
    await connector.stop();
    expect(await started).toBeDefined();
    await sleep(700);
    expect(discord.openSockets).toBe(0);
  });

  it('stop during an opening handshake that fails later throws nothing', async () => {
    const gateway = await silentGateway(100);
    try {
      const connector = createDiscordProvider({ apiUrl: discord.apiUrl, gatewayUrl: gateway.url }).connect({
        token: TOKEN,
        onMessage: async () => {},
        log: recordingLogger().log,
      });
      const started = connector.start().catch((e: unknown) => e);
      await vi.waitFor(() => expect(gateway.connections).toBe(1));
      await connector.stop();
      expect(await started).toBeInstanceOf(Error);
      // the cut handshake would surface here as an uncaught exception
      await sleep(300);
    } finally {
      gateway.server?.close();
    }
  });

  it('a start that times out stops reconnecting', async () => {
    const gateway = await silentGateway(0);
    try {
      const quiet = createDiscordProvider({ apiUrl: discord.apiUrl, gatewayUrl: gateway.url, startTimeoutMs: 800 });
      const connector = quiet.connect({ token: TOKEN, onMessage: async () => {}, log: recordingLogger().log });
      running.push(connector);
      await expect(connector.start()).rejects.toMatchObject({ id: 'CHANNEL_PROVIDER_UNREACHABLE' });
      // it tried, again every 500 ms, then stopped
      expect(gateway.connections).toBeGreaterThan(1);
      const tries = gateway.connections;
      await sleep(700);
      expect(gateway.connections).toBe(tries);
    } finally {
      gateway.server?.close();
    }
  });
});
