/**
 * How the platform holds an agent's Telegram bot (docs/channels.md "Connections", "Telegram"): a
 * token Telegram stops accepting marks the channel `error` with the reason, logged once, and the
 * connection is retried with backoff; and when PUBLIC_URL is https and the process serves the web
 * app, the bot receives by webhook at an address derived from its token, with Telegram's secret
 * header checked. grammY against the local Bot API server; the agent's gateway is the fake model.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { type FakeTelegramApi, startFakeTelegramApi } from '../fakes/telegram-api.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { GATEWAY_TOKEN, type Owner, ownerWithAgent } from '../sessions/helpers.ts';

let agent: FakeOpenAi;
let telegram: FakeTelegramApi;
let polling: TestPlatform;
let hooked: TestPlatform;
const logs: string[] = [];
let n = 0;

function newBot() {
  n++;
  const token = `${9100000 + n}:AAG${'w'.repeat(24)}conn${n}`;
  telegram.addBot(token, { id: 9100000 + n, username: `conn_${n}_bot` });
  return token;
}
const channelOf = async (t: TestPlatform, o: Owner) =>
  (await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels`, headers: { cookie: o.cookie } })).json().channels[0];

beforeAll(async () => {
  agent = await startFakeOpenAi({ apiKey: GATEWAY_TOKEN });
  telegram = await startFakeTelegramApi();
  const sink = new Writable({
    write(chunk, _e, done) {
      logs.push(String(chunk));
      done();
    },
  });
  polling = await startTestPlatform(
    { REGISTER_RATE_LIMIT: '100000', TELEGRAM_API_URL: telegram.apiUrl },
    { logger: pino({ level: 'info' }, sink) },
  );
  await polling.platform.startChannels({ servesWeb: false });
  hooked = await startTestPlatform({
    REGISTER_RATE_LIMIT: '100000',
    TELEGRAM_API_URL: telegram.apiUrl,
    PUBLIC_URL: 'https://agents.example.org',
  });
  await hooked.platform.startChannels({ servesWeb: true });
});
afterAll(async () => {
  await polling?.close();
  await hooked?.close();
  await telegram?.close();
  await agent?.close();
});

describe('a bot whose token Telegram stops accepting', () => {
  it('reads `error` with the reason, is logged once, and is retried with backoff', async () => {
    const o = await ownerWithAgent(polling, agent);
    const token = newBot();
    const res = await polling.web.inject({
      method: 'PUT',
      url: `/api/agents/${o.agentId}/channels/telegram`,
      headers: { cookie: o.cookie },
      payload: { botToken: token },
    });
    expect(res.statusCode).toBe(200);
    await eventually(async () => (await channelOf(polling, o)).status === 'connected');
    telegram.removeBot(token);
    const failed = await eventually(async () => {
      const c = await channelOf(polling, o);
      return c.status === 'error' ? c : null;
    });
    expect(failed.error).toMatch(/Unauthorized/);
    expect(JSON.stringify(failed)).not.toContain(token);
    // retried: Telegram is asked again after the first backoff (2 s)
    const asked = telegram.callsOf(token, 'getMe').length;
    await eventually(async () => telegram.callsOf(token, 'getMe').length > asked, 15_000);
    const lines = logs.filter((l) => l.includes('channel connection failed') && l.includes(o.agentId));
    expect(lines).toHaveLength(1);
    expect(logs.join('\n')).not.toContain(token);
  }, 20_000);
});

describe('webhook when PUBLIC_URL is https', () => {
  it('registers <PUBLIC_URL>/api/channels/telegram/<path> with a secret token, answers updates posted there, and refuses a wrong secret', async () => {
    const o = await ownerWithAgent(hooked, agent);
    const token = newBot();
    await hooked.web.inject({
      method: 'PUT',
      url: `/api/agents/${o.agentId}/channels/telegram`,
      headers: { cookie: o.cookie },
      payload: { botToken: token },
    });
    await eventually(async () => (await channelOf(hooked, o)).status === 'connected');
    const set = telegram.callsOf(token, 'setWebhook')[0]!.body;
    expect(set.url).toMatch(/^https:\/\/agents\.example\.org\/api\/channels\/telegram\/[0-9a-f]{40}$/);
    expect(set.url).not.toContain(token);
    expect(telegram.callsOf(token, 'getUpdates')).toEqual([]); // no long polling
    const path = new URL(set.url).pathname;
    const update = {
      update_id: 1,
      message: {
        message_id: 1,
        date: 0,
        chat: { id: 77, type: 'private' },
        from: { id: 77, is_bot: false, first_name: 'Hook' },
        text: 'by webhook',
      },
    };
    const wrong = await hooked.web.inject({
      method: 'POST',
      url: path,
      headers: { 'x-telegram-bot-api-secret-token': 'nope' },
      payload: update,
    });
    expect(wrong.statusCode).toBe(404);
    const right = await hooked.web.inject({
      method: 'POST',
      url: path,
      headers: { 'x-telegram-bot-api-secret-token': set.secret_token },
      payload: update,
    });
    expect(right.statusCode).toBe(200);
    await eventually(async () => telegram.sent(token).length === 1);
    expect(telegram.sent(token)).toEqual([{ chat_id: '77', text: 'Echo: by webhook' }]);
    // disconnected: the webhook is removed at Telegram, and the address answers 404
    await hooked.web.inject({ method: 'DELETE', url: `/api/agents/${o.agentId}/channels/telegram`, headers: { cookie: o.cookie } });
    await eventually(async () => telegram.callsOf(token, 'deleteWebhook').length > 0);
    const gone = await hooked.web.inject({
      method: 'POST',
      url: path,
      headers: { 'x-telegram-bot-api-secret-token': set.secret_token },
      payload: update,
    });
    expect(gone.statusCode).toBe(404);
  });
});
