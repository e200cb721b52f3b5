/**
 * Telegram channels owned by the platform (docs/channels.md; §2 channels.<name>.allowFrom,
 * session.dmScope per-channel-peer, session.resetTriggers; §4.18): the real grammY client against
 * a local server speaking the Bot API (test/fakes/telegram-api.ts), the real platform on
 * PostgreSQL, and the agent's gateway the OpenAI-compatible fake, whose recorded requests are
 * exactly what the model was asked.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { type FakeTelegramApi, startFakeTelegramApi } from '../fakes/telegram-api.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { chatRequests, GATEWAY_TOKEN, type Owner, ownerWithAgent } from '../sessions/helpers.ts';

let t: TestPlatform;
let agent: FakeOpenAi;
let telegram: FakeTelegramApi;
const logs: string[] = [];
let botSeq = 0;

/** A bot Telegram knows, with a token of the real shape. */
function newBot() {
  const n = ++botSeq;
  const token = `${7000000 + n}:AAH${'k'.repeat(20)}secret${n}x${process.pid}`;
  const bot = { id: 7000000 + n, username: `talk_test_${n}_bot` };
  telegram.addBot(token, bot);
  return { token, bot };
}

const put = (o: Owner, payload: Record<string, unknown>, agentId = o.agentId) =>
  t.web.inject({ method: 'PUT', url: `/api/agents/${agentId}/channels/telegram`, headers: { cookie: o.cookie }, payload });
const list = async (o: Owner) => {
  const res = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels`, headers: { cookie: o.cookie } });
  expect(res.statusCode).toBe(200);
  return res.json();
};

/** An owner whose agent has a connected Telegram bot. */
async function connected(settings: Record<string, unknown> = {}) {
  const o = await ownerWithAgent(t, agent);
  const b = newBot();
  const res = await put(o, { botToken: b.token, ...settings });
  expect(res.statusCode, res.body).toBe(200);
  await eventually(async () => (await list(o)).channels[0]?.status === 'connected');
  return { o, ...b };
}

const said = (token: string, chatId: number) =>
  telegram
    .sent(token)
    .filter((m) => m.chat_id === String(chatId))
    .map((m) => m.text);

beforeAll(async () => {
  agent = await startFakeOpenAi({ apiKey: GATEWAY_TOKEN });
  telegram = await startFakeTelegramApi();
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk));
      done();
    },
  });
  t = await startTestPlatform(
    { REGISTER_RATE_LIMIT: '100000', TELEGRAM_API_URL: telegram.apiUrl },
    { logger: pino({ level: 'debug' }, sink) },
  );
  await t.platform.startChannels({ servesWeb: false });
});
afterAll(async () => {
  await t?.close();
  await telegram?.close();
  await agent?.close();
});
beforeEach(() => {
  agent.reset();
  agent.reply = undefined;
});

describe('PUT /api/agents/:id/channels/telegram', () => {
  it('a token Telegram refuses is 400 CHANNEL_TOKEN_REFUSED with its reason, and nothing is stored', async () => {
    const o = await ownerWithAgent(t, agent);
    const res = await put(o, { botToken: '999:not-a-token-telegram-knows-about' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CHANNEL_TOKEN_REFUSED' });
    expect(res.json().error).toMatch(/Telegram refused the bot token: Unauthorized/);
    expect(res.body).not.toContain('not-a-token');
    expect((await list(o)).channels).toEqual([]);
  });

  it('connects the bot (getMe), answers without the token, and another user cannot see or change it (404)', async () => {
    const o = await ownerWithAgent(t, agent);
    const b = newBot();
    const res = await put(o, { botToken: b.token, allowFrom: ['@Ada', ' 42 '] });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(b.token);
    expect(res.json()).toMatchObject({
      kind: 'telegram',
      bot: { id: String(b.bot.id), username: b.bot.username },
      tokenHint: `••••${b.token.slice(-4)}`,
      allowFrom: ['@ada', '42'],
      enabled: true,
    });
    expect(telegram.callsOf(b.token, 'getMe').length).toBeGreaterThan(0);
    const listed = await eventually(async () => {
      const l = await list(o);
      return l.channels[0]?.status === 'connected' ? l : null;
    });
    expect(JSON.stringify(listed)).not.toContain(b.token);
    // the stored token is sealed
    const row = await t.database.db.kysely
      .selectFrom('agent_channels')
      .select('token_enc')
      .where('agent_id', '=', o.agentId)
      .executeTakeFirstOrThrow();
    expect(row.token_enc).not.toContain(b.token);

    const other = await signUp(t.web);
    const theirs = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels`, headers: { cookie: other.cookie } });
    expect(theirs.statusCode).toBe(404);
    const change = await t.web.inject({
      method: 'PUT',
      url: `/api/agents/${o.agentId}/channels/telegram`,
      headers: { cookie: other.cookie },
      payload: { botToken: newBot().token },
    });
    expect(change.statusCode).toBe(404);
    const anonymous = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels` });
    expect(anonymous.statusCode).toBe(401);
    // row-level security: the other user's queries see none of the channel's rows
    const seen = await t.database.db.withUser(other.id, async (trx) => ({
      channels: await trx.selectFrom('agent_channels').selectAll().execute(),
      own: await t.database.db.kysely.selectFrom('agent_channels').select('agent_id').where('agent_id', '=', o.agentId).execute(),
    }));
    expect(seen.channels).toEqual([]);
    expect(seen.own).toHaveLength(1);
  });

  it('DELETE stops the bot: it no longer polls', async () => {
    const { o, token } = await connected();
    await eventually(async () => telegram.polling(token) > 0);
    const res = await t.web.inject({ method: 'DELETE', url: `/api/agents/${o.agentId}/channels/telegram`, headers: { cookie: o.cookie } });
    expect(res.statusCode).toBe(200);
    await eventually(async () => telegram.polling(token) === 0);
    const polls = telegram.callsOf(token, 'getUpdates').length;
    await new Promise((r) => setTimeout(r, 300));
    expect(telegram.callsOf(token, 'getUpdates').length).toBe(polls);
    const again = await t.web.inject({
      method: 'DELETE',
      url: `/api/agents/${o.agentId}/channels/telegram`,
      headers: { cookie: o.cookie },
    });
    expect(again.statusCode).toBe(404);
  });
});

describe('an agent deleted', () => {
  it('takes its channel with it: the bot stops polling', async () => {
    const { o, token } = await connected();
    await eventually(async () => telegram.polling(token) > 0);
    await t.database.db.kysely.deleteFrom('agents').where('id', '=', o.agentId).execute();
    await eventually(async () => telegram.polling(token) === 0, 15_000);
    expect(await t.database.db.kysely.selectFrom('agent_channels').select('kind').where('agent_id', '=', o.agentId).execute()).toEqual([]);
  }, 20_000);
});

describe('conversations on Telegram', () => {
  it('a message is answered in its chat, with the typing indicator while the agent works; the turn is stored labelled telegram', async () => {
    const { o, token } = await connected();
    telegram.sendToBot(token, { id: 111, username: 'ada' }, 'hello agent');
    await eventually(async () => said(token, 111).length > 0);
    expect(said(token, 111)).toEqual(['Echo: hello agent']);
    expect(telegram.callsOf(token, 'sendChatAction').map((c) => c.body)).toContainEqual(
      expect.objectContaining({ chat_id: '111', action: 'typing' }),
    );
    const res = await t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/messages?session=telegram:111`,
      headers: { cookie: o.cookie },
    });
    expect(res.json().messages.map((m: { platform: string; content: string }) => [m.platform, m.content])).toEqual([
      ['telegram', 'Echo: hello agent'],
      ['telegram', 'hello agent'],
    ]);
    // the dashboard's transcript does not show it
    const dashboard = await t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/messages?session=dashboard`,
      headers: { cookie: o.cookie },
    });
    expect(dashboard.json().messages).toEqual([]);
  });

  it("a long reply is split at Telegram's 4096 characters", async () => {
    const { token } = await connected();
    agent.reply = `${'word '.repeat(1500)}\n\n${'more '.repeat(700)}`.trim();
    telegram.sendToBot(token, { id: 112 }, 'tell me everything');
    await eventually(async () => said(token, 112).join(' ').length >= agent.reply!.length - 10);
    const pieces = said(token, 112);
    expect(pieces.length).toBe(3);
    for (const p of pieces) expect(p.length).toBeLessThanOrEqual(4096);
    expect(pieces.join(' ').replace(/\s+/g, ' ')).toBe(agent.reply.replace(/\s+/g, ' '));
  });

  it("each person has a session of their own: A's turns never reach the model in B's conversation (per-channel-peer)", async () => {
    const { token } = await connected();
    telegram.sendToBot(token, { id: 201, username: 'alice' }, 'my password is swordfish');
    await eventually(async () => said(token, 201).length === 1);
    agent.reset();
    telegram.sendToBot(token, { id: 202, username: 'bob' }, 'what is the password?');
    await eventually(async () => said(token, 202).length === 1);
    expect(chatRequests(agent)).toEqual([['user: what is the password?']]);
    agent.reset();
    telegram.sendToBot(token, { id: 201, username: 'alice' }, 'and mine?');
    await eventually(async () => said(token, 201).length === 2);
    expect(chatRequests(agent)).toEqual([
      ['user: my password is swordfish', 'assistant: Echo: my password is swordfish', 'user: and mine?'],
    ]);
  });

  it('a reset word starts that person over without calling the model; others keep their session', async () => {
    const { token } = await connected();
    telegram.sendToBot(token, { id: 301 }, 'remember blue');
    telegram.sendToBot(token, { id: 302 }, 'remember red');
    await eventually(async () => said(token, 301).length === 1 && said(token, 302).length === 1);
    agent.reset();
    telegram.sendToBot(token, { id: 301 }, '/reset');
    await eventually(async () => said(token, 301).length === 2);
    expect(said(token, 301)[1]).toMatch(/new session/i);
    expect(chatRequests(agent)).toEqual([]);
    telegram.sendToBot(token, { id: 301 }, 'what colour?');
    telegram.sendToBot(token, { id: 302 }, 'what colour?');
    await eventually(async () => said(token, 301).length === 3 && said(token, 302).length === 2);
    const sent = chatRequests(agent);
    expect(sent).toContainEqual(['user: what colour?']);
    expect(sent).toContainEqual(['user: remember red', 'assistant: Echo: remember red', 'user: what colour?']);
  });

  it('a long conversation is compacted past 80% of the §8 session limit and keeps going (~4 characters a token)', async () => {
    const { token } = await connected();
    agent.reply = 'y'.repeat(60_000); // ~15,000 tokens an answer, sent back as 15 Telegram messages
    const ask = async (i: number) => {
      const before = said(token, 701).length;
      telegram.sendToBot(token, { id: 701 }, `question ${i} ${'q'.repeat(4000)}`);
      await eventually(async () => said(token, 701).length >= before + 15, 20_000);
    };
    for (let i = 0; i < 6; i++) await ask(i); // five answered turns are ~80,000 tokens: the sixth compacts first
    const requests = chatRequests(agent);
    const summary = requests.findIndex((r) => r[0]!.startsWith('system: You are compacting'));
    expect(summary).toBeGreaterThan(0);
    const after = requests[summary + 1]!;
    expect(after[0]!.startsWith('system: Summary of the earlier part')).toBe(true);
    expect(after.some((m) => m.startsWith('user: question 0 '))).toBe(false);
    expect(after.at(-1)!.startsWith('user: question 5 ')).toBe(true);
    agent.reply = undefined;
    telegram.sendToBot(token, { id: 701 }, 'still there?');
    await eventually(async () => said(token, 701).at(-1) === 'Echo: still there?');
  }, 60_000);

  it('allowFrom is enforced before the model is called; a stranger gets a pairing code the owner approves (§2)', async () => {
    const { o, token } = await connected({ allowFrom: ['@alice'] });
    telegram.sendToBot(token, { id: 401, username: 'Alice' }, 'hi from alice');
    await eventually(async () => said(token, 401).length === 1);
    expect(said(token, 401)).toEqual(['Echo: hi from alice']);
    agent.reset();
    telegram.sendToBot(token, { id: 402, username: 'mallory' }, 'let me in');
    await eventually(async () => said(token, 402).length === 1);
    expect(chatRequests(agent)).toEqual([]); // the model never saw it
    const code = /pairing code: ([A-Z0-9]{8})/.exec(said(token, 402)[0]!)?.[1];
    expect(code).toBeDefined();
    // a second message gets the same code, still without a model call
    telegram.sendToBot(token, { id: 402, username: 'mallory' }, 'please');
    await eventually(async () => said(token, 402).length === 2);
    expect(said(token, 402)[1]).toContain(code!);
    expect(chatRequests(agent)).toEqual([]);
    const l = await list(o);
    expect(l.pairings).toEqual([expect.objectContaining({ kind: 'telegram', code, senderId: '402', username: 'mallory' })]);
    expect(l.senders.map((s: { id: string; allowed: boolean }) => [s.id, s.allowed])).toEqual(
      expect.arrayContaining([
        ['401', true],
        ['402', false],
      ]),
    );
    // another user cannot approve it; the owner can
    const other = await signUp(t.web);
    const url = `/api/agents/${o.agentId}/channels/telegram/pairings/${code}`;
    expect((await t.web.inject({ method: 'POST', url, headers: { cookie: other.cookie } })).statusCode).toBe(404);
    const approved = await t.web.inject({ method: 'POST', url, headers: { cookie: o.cookie } });
    expect(approved.statusCode).toBe(200);
    expect(approved.json()).toEqual({ success: true, senderId: '402', username: 'mallory' });
    expect((await list(o)).channels[0].allowFrom).toEqual(['@alice', '402']);
    expect((await t.web.inject({ method: 'POST', url, headers: { cookie: o.cookie } })).statusCode).toBe(404); // used
    telegram.sendToBot(token, { id: 402, username: 'mallory' }, 'now?');
    await eventually(async () => said(token, 402).length === 3);
    expect(said(token, 402)[2]).toBe('Echo: now?');
  });

  it("at most 3 pairing codes wait at once (OpenClaw's cap); a fourth stranger is told to try later", async () => {
    const { o, token } = await connected({ allowFrom: ['1'] });
    for (const id of [801, 802, 803, 804]) telegram.sendToBot(token, { id }, 'hi');
    await eventually(async () => [801, 802, 803, 804].every((id) => said(token, id).length === 1));
    const replies = [801, 802, 803, 804].map((id) => said(token, id)[0]!);
    expect(replies.filter((r) => /pairing code: [A-Z0-9]{8}/.test(r))).toHaveLength(3);
    expect(replies.filter((r) => /try again later/.test(r))).toHaveLength(1);
    expect((await list(o)).pairings).toHaveLength(3);
  });

  it('a pairing code expires after an hour', async () => {
    const { o, token } = await connected({ allowFrom: ['1'] });
    telegram.sendToBot(token, { id: 501 }, 'hello?');
    await eventually(async () => said(token, 501).length === 1);
    const code = /pairing code: ([A-Z0-9]{8})/.exec(said(token, 501)[0]!)![1]!;
    await t.database.db.kysely
      .updateTable('channel_pairings')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('agent_id', '=', o.agentId)
      .execute();
    expect((await list(o)).pairings).toEqual([]);
    const res = await t.web.inject({
      method: 'POST',
      url: `/api/agents/${o.agentId}/channels/telegram/pairings/${code}`,
      headers: { cookie: o.cookie },
    });
    expect(res.statusCode).toBe(404);
  });
});

describe('the token stays with the platform', () => {
  it('in no answer, no log line and no process command line or environment', async () => {
    const { o, token } = await connected();
    telegram.sendToBot(token, { id: 601 }, 'ping');
    await eventually(async () => said(token, 601).length === 1);
    const answers = [await list(o), (await put(o, { allowFrom: ['601'] })).json()];
    expect(JSON.stringify(answers)).not.toContain(token);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(token);
    const secret = token.split(':')[1]!;
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      for (const file of ['cmdline', 'environ']) {
        let text = '';
        try {
          text = readFileSync(`/proc/${pid}/${file}`, 'utf8');
        } catch {
          continue; // another user's process, or gone
        }
        expect(text.includes(secret), `/proc/${pid}/${file}`).toBe(false);
      }
    }
  });
});
