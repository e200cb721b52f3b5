/**
 * A Telegram bot for a real agent (docs/channels.md; §4.18 provisioning with channel tokens): the
 * whole platform on real sockets with the local driver and the built-in runtime in its sandbox,
 * grammY against the local Bot API server, and the fake model provider the agent calls. A message
 * is answered by the agent's own model call; the bot token is in no file of the agent, no process
 * command line or environment on this machine (the agent's included), and no answer.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeTelegramApi, startFakeTelegramApi } from '../fakes/telegram-api.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

const TOKEN = '7777777:AAE-live-telegram-bot-token-with-a-secret-part';
const SECRET = TOKEN.split(':')[1]!;
let live: LivePlatform;
let telegram: FakeTelegramApi;
let cookie = '';

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${live.webUrl}${path}`, {
    method,
    headers: { cookie, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const m = /service-session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
  if (m) cookie = `service-session=${m[1]}`;
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as Record<string, any> };
}

/** Every file under `dir` (following no links), for a look at what the agent holds on disk. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return filesUnder(p);
    return e.isFile() && statSync(p).size < 5_000_000 ? [p] : [];
  });
}

beforeAll(async () => {
  telegram = await startFakeTelegramApi();
  telegram.addBot(TOKEN, { id: 7777777, username: 'live_agent_bot' });
  live = await startLivePlatform({ ADMIN_EMAILS: 'owner@example.com', TELEGRAM_API_URL: telegram.apiUrl });
  expect((await api('POST', '/api/register', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(201);
  expect((await api('POST', '/api/auth/login', { email: 'owner@example.com', password: 'correct horse battery' })).status).toBe(200);
}, 120_000);
afterAll(async () => {
  await live?.close();
  await telegram?.close();
});

describe('a real agent on Telegram', () => {
  it('provisioned with a bot token: answers in the chat through its own model call, and the token never reaches it', async () => {
    const prov = await api('POST', '/api/agents/provision', {
      name: 'Telegram agent',
      config: { channels: { telegram: { botToken: TOKEN } } },
    });
    expect(prov.status, prov.text).toBe(201);
    expect(prov.text).not.toContain(SECRET);
    const agentId = prov.body.agent.id as string;
    await eventually(
      async () => {
        const a = (await api('GET', `/api/agents/${agentId}`)).body.agent;
        if (a?.status === 'error') throw new Error('the agent failed to start');
        return a?.status === 'running';
      },
      90_000,
      200,
    );
    await eventually(async () => (await api('GET', `/api/agents/${agentId}/channels`)).body.channels[0]?.status === 'connected');

    live.upstream.reset();
    telegram.sendToBot(TOKEN, { id: 4242, username: 'friend' }, 'hello from telegram');
    await eventually(async () => telegram.sent(TOKEN).length > 0, 30_000);
    expect(telegram.sent(TOKEN)).toEqual([{ chat_id: '4242', text: 'Echo: hello from telegram' }]);
    // the agent's own model call carried the message (its runtime adds its system prompt first)
    const asked = live.upstream.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!;
    expect(asked.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'hello from telegram' });

    // the token: in no answer, no file of the agent, no process's command line or environment
    const answers = [
      await api('GET', `/api/agents/${agentId}`),
      await api('GET', `/api/agents/${agentId}/config`),
      await api('GET', `/api/agents/${agentId}/channels`),
    ];
    for (const a of answers) expect(a.text).not.toContain(SECRET);
    for (const f of filesUnder(join(live.config.DATA_DIR, 'agents'))) {
      let text = '';
      try {
        text = readFileSync(f, 'utf8');
      } catch {
        continue;
      }
      expect(text.includes(SECRET), f).toBe(false);
    }
    let looked = 0;
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      for (const file of ['cmdline', 'environ']) {
        let text = '';
        try {
          text = readFileSync(`/proc/${pid}/${file}`, 'utf8');
          looked++;
        } catch {
          continue;
        }
        expect(text.includes(SECRET), `/proc/${pid}/${file}`).toBe(false);
      }
    }
    expect(looked).toBeGreaterThan(10);
  }, 150_000);
});
