/**
 * Chat history in the order it was said (docs/agents.md "Who stores turns"; issue: newcomer audit
 * 2026-11-25, "chat history scrambled"): every stored turn lists its question before its answer,
 * the question keeps the time it was asked, and a completion streamed through the gateway proxy
 * (`/api/agents/:id/v1/chat/completions`, `stream: true`) is stored like the platform's own chat,
 * read from the stream while the caller receives it. The agent's gateway is the test's local
 * OpenAI-compatible fake; the platform runs on real PostgreSQL.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { withDatabase } from '../global-setup.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

const GATEWAY_TOKEN = 'gw-token-chat-order-0123456789abcdef';

let t: TestPlatform;
let agentClient: FakeOpenAi;
let webUrl: string;
let seq = 0;

type Owner = { id: string; cookie: string; key: string; agentId: string };

/** A user with a running agent whose gateway is the fake, and an `sk_` key. */
async function owner(): Promise<Owner> {
  const user = await signUp(t.web);
  const agentId = `agent-order-${seq++}`;
  const gatewayUrl = agentClient.url.replace(/\/v1$/, '');
  await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url)
            VALUES (${agentId}, ${user.id}, 'Orderly', 'running', ${agentId}, ${gatewayUrl}, ${gatewayUrl})`.execute(t.database.db.kysely);
  await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc)
            VALUES (${agentId}, ${user.id}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, GATEWAY_TOKEN)})`.execute(
    t.database.db.kysely,
  );
  const key = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: user.cookie }, payload: { name: 'k' } });
  return { id: user.id, cookie: user.cookie, key: key.json().key, agentId };
}

type Message = { sender: string; content: string; timestamp: string };

/** The stored history, oldest first (the API lists newest first). */
async function history(o: Owner): Promise<Message[]> {
  const res = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/messages?limit=100`, headers: { cookie: o.cookie } });
  expect(res.statusCode).toBe(200);
  return (res.json().messages as Message[]).reverse();
}

beforeAll(async () => {
  agentClient = await startFakeOpenAi({ apiKey: GATEWAY_TOKEN });
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '100000' });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  webUrl = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
  await agentClient?.close();
});
beforeEach(() => agentClient.reset());

describe('POST /api/chat: each turn stored question first, with the time it was asked', () => {
  it('six turns, JSON and streamed, read back in the order they were said', async () => {
    const o = await owner();
    // the agent takes a moment, so a question and its answer cannot share a timestamp
    agentClient.delayMs = 15;
    const said: string[] = [];
    for (let i = 0; i < 6; i++) {
      const message = `question ${i}`;
      const res = await t.web.inject({
        method: 'POST',
        url: '/api/chat',
        headers: { cookie: o.cookie, ...(i % 2 ? { accept: 'text/event-stream' } : {}) },
        payload: { agentId: o.agentId, message },
      });
      expect(res.statusCode).toBe(200);
      said.push(message, `Echo: ${message}`);
    }
    const h = await history(o);
    expect(h.map((m) => m.content)).toEqual(said);
    expect(h.map((m) => m.sender)).toEqual(said.map((_, i) => (i % 2 ? 'agent' : 'user')));
    for (let i = 0; i < h.length; i += 2) {
      // the question is dated when it was asked, before its answer
      expect(Date.parse(h[i]!.timestamp)).toBeLessThan(Date.parse(h[i + 1]!.timestamp));
    }
  });

  it('pages of the history keep the order (limit/offset)', async () => {
    const o = await owner();
    for (const message of ['a', 'b', 'c']) {
      await t.web.inject({ method: 'POST', url: '/api/chat', headers: { cookie: o.cookie }, payload: { agentId: o.agentId, message } });
    }
    const page = await t.web.inject({
      method: 'GET',
      url: `/api/agents/${o.agentId}/messages?limit=2&offset=1`,
      headers: { cookie: o.cookie },
    });
    expect(page.json().messages.map((m: Message) => m.content)).toEqual(['c', 'Echo: b']);
    expect(page.json().total).toBe(6);
  });
});

describe('the gateway proxy stores streamed turns', () => {
  const client = (o: Owner) => new OpenAI({ apiKey: o.key, baseURL: `${webUrl}/api/agents/${o.agentId}/v1`, maxRetries: 0 });

  it('a streamed completion (official openai client, sk_ key): the question and the whole answer, in order', async () => {
    const o = await owner();
    const stream = await client(o).chat.completions.create({
      model: 'auto',
      stream: true,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'an earlier question' },
        { role: 'assistant', content: 'an earlier answer' },
        { role: 'user', content: 'stream me a longer answer please' },
      ],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('Echo: stream me a longer answer please');
    const h = await eventually(async () => {
      const rows = await history(o);
      return rows.length === 2 ? rows : null;
    });
    expect(h.map((m) => [m.sender, m.content])).toEqual([
      ['user', 'stream me a longer answer please'],
      ['agent', 'Echo: stream me a longer answer please'],
    ]);
  });

  it('a streamed completion with a session cookie and a multi-part question', async () => {
    const o = await owner();
    const res = await fetch(`${webUrl}/api/agents/${o.agentId}/v1/chat/completions`, {
      method: 'POST',
      headers: { cookie: o.cookie, 'content-type': 'application/json' },
      body: JSON.stringify({
        stream: true,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'part one' },
              { type: 'text', text: 'part two' },
            ],
          },
        ],
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('data: [DONE]');
    const h = await eventually(async () => {
      const rows = await history(o);
      return rows.length === 2 ? rows : null;
    });
    expect(h.map((m) => m.content)).toEqual(['part one\npart two', 'Echo: part onepart two']);
  });

  it('the stream reaches the caller as it is produced (nothing waits for the end), and a stream cut short stores nothing', async () => {
    const o = await owner();
    agentClient.holdStreams = true; // one delta, then the agent holds the stream open
    const abort = new AbortController();
    const res = await fetch(`${webUrl}/api/agents/${o.agentId}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'hold on' }] }),
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    let received = '';
    while (!received.includes('Echo')) received += new TextDecoder().decode((await reader.read()).value);
    expect(received).toContain('"content":"Echo"');
    abort.abort();
    await agentClient.waitForAbort();
    await new Promise((r) => setTimeout(r, 100));
    expect(await history(o)).toEqual([]);
  });

  it('non-streamed completions and other paths are not stored by the proxy (the runtime reports those)', async () => {
    const o = await owner();
    const completion = await client(o).chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: 'not streamed' }] });
    expect(completion.choices[0]!.message.content).toBe('Echo: not streamed');
    const models = await fetch(`${webUrl}/api/agents/${o.agentId}/v1/models`, { headers: { authorization: `Bearer ${o.key}` } });
    expect(models.status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    expect(await history(o)).toEqual([]);
  });

  it("an agent's failing stream (an error event) stores nothing", async () => {
    const o = await owner();
    agentClient.failWith = 500;
    const res = await fetch(`${webUrl}/api/agents/${o.agentId}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'fail please' }] }),
    });
    expect(res.status).toBe(500);
    await res.text();
    await new Promise((r) => setTimeout(r, 100));
    expect(await history(o)).toEqual([]);
  });
});

describe('migration 100 orders the history stored before it', () => {
  it('rows of one turn that share a timestamp: the question first', async () => {
    const admin = inject('dbAdminUrl');
    const name = `t_${inject('dbTemplate')}_order${Math.random().toString(16).slice(2, 8)}`;
    const c = new pg.Client({ connectionString: admin });
    await c.connect();
    await c.query(`CREATE DATABASE "${name}"`);
    const url = withDatabase(admin, name);
    const before = mkdtempSync(join(tmpdir(), 'migrations-before-100-'));
    try {
      for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => f < '100')) cpSync(join(MIGRATIONS_DIR, f), join(before, f));
      await migrate(url, before);
      const db = new pg.Client({ connectionString: url });
      await db.connect();
      try {
        const user = (
          await db.query<{ id: string }>(
            `INSERT INTO users (email, name, password_hash, referral_code) VALUES ('old@example.com', 'Old', 'x', 'OLDREF') RETURNING id`,
          )
        ).rows[0]!.id;
        await db.query(
          `INSERT INTO agents (id, user_id, name, status, subdomain, url) VALUES ('old-agent', $1, 'Old', 'running', 's', 'u')`,
          [user],
        );
        // two turns as the old code stored them: both sides of a turn at one time, answers written
        // first here so that insertion order cannot be what puts them right
        const turn = async (at: string, q: string) => {
          for (const [sender, content] of [
            ['agent', `Echo: ${q}`],
            ['user', q],
          ])
            await db.query(
              `INSERT INTO agent_messages (agent_id, user_id, sender, content, created_at) VALUES ('old-agent', $1, $2, $3, $4)`,
              [user, sender, content, at],
            );
        };
        await turn('2026-11-20T10:00:05Z', 'second');
        await turn('2026-11-20T10:00:00Z', 'first');
        await migrate(url);
        const rows = await db.query<{ content: string }>(`SELECT content FROM agent_messages ORDER BY seq`);
        expect(rows.rows.map((r) => r.content)).toEqual(['first', 'Echo: first', 'second', 'Echo: second']);
        // new rows come after them
        await db.query(`INSERT INTO agent_messages (agent_id, user_id, sender, content) VALUES ('old-agent', $1, 'user', 'third')`, [user]);
        const last = await db.query<{ content: string }>(`SELECT content FROM agent_messages ORDER BY seq DESC LIMIT 1`);
        expect(last.rows[0]!.content).toBe('third');
      } finally {
        await db.end();
      }
    } finally {
      rmSync(before, { recursive: true, force: true });
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.end();
    }
  });
});
