/**
 * §4.8 plugins through the gateway, paid by a session: tts and stt on the provider's
 * OpenAI-compatible audio endpoints, generate-text and agent streaming with
 * `Accept: text/event-stream`, and the card method (card-funded balance of the caller's wallet,
 * key or cookie; 401 for an invalid key).
 */

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { request } from 'undici';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSessionTypes, sessionKeyHash } from '../../src/domains/payments/sessions/receipts.rules.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { type FakeAudio, startFakeAudio } from '../fakes/openai-audio.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

let router: FakeOpenAi;
let audio: FakeAudio;
let t: TestPlatform;
let base: string;
let n = 0;

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  audio = await startFakeAudio('openai-key');
  t = await startTestPlatform({
    ROUTER_API_KEY: 'router-key',
    ROUTER_BASE_URL: router.url,
    OPENAI_API_KEY: 'openai-key',
    OPENAI_BASE_URL: audio.url,
  });
  await t.web.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
  await router?.close();
  await audio?.close();
});

async function session(deposit = '1.00') {
  const pk = generatePrivateKey();
  const account = privateKeyToAccount(pk);
  await t.platform.services.ledger.credit({
    address: account.address,
    amountMicros: 10_000_000,
    eventId: `evt_plugins_${n++}`,
    source: 'test',
  });
  const deadline = Math.floor(Date.now() / 1000) + 600;
  const salt = `0x${randomBytes(32).toString('hex')}` as Hex;
  const sessionId = `ps_${randomBytes(32).toString('base64url')}`;
  const { domain } = (await t.web.inject({ method: 'GET', url: '/api/payments/receipt-signer' })).json();
  const signature = await account.signTypedData({
    domain,
    types: openSessionTypes,
    primaryType: 'OpenSession',
    message: {
      wallet: account.address,
      deposit: BigInt(Math.round(Number(deposit) * 1e6)),
      deadline: BigInt(deadline),
      salt,
      sessionKeyHash: sessionKeyHash(sessionId),
    },
  });
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/wallet/sessions',
    payload: { address: account.address, deposit, signature, deadline, salt, sessionKeyHash: sessionKeyHash(sessionId) },
  });
  expect(res.statusCode, res.body).toBe(201);
  return { 'x-payment-method': 'session', 'x-session-id': sessionId, 'x-wallet-address': account.address };
}

const gw = (headers: Record<string, string>, payload: object) =>
  t.web.inject({ method: 'POST', url: '/api/v1/gateway', headers: { 'content-type': 'application/json', ...headers }, payload });

describe('plugins', () => {
  it("tts: the provider's /audio/speech, $0.03", async () => {
    const h = await session();
    const res = await gw({ ...h, 'x-plugin-id': 'tts' }, { input: 'hello world', voice: 'nova' });
    expect(res.statusCode, res.body).toBe(200);
    const msg = res.json().message as { audio: string; contentType: string };
    expect(Buffer.from(msg.audio, 'base64').toString()).toBe('ID3-fake-audio:nova:hello world');
    expect(msg.contentType).toBe('audio/mpeg');
    expect(audio.speech.at(-1)!.body).toMatchObject({ model: 'tts-1', input: 'hello world', voice: 'nova', response_format: 'mp3' });
    expect(res.headers['x-session-remaining']).toBe('0.97');
  });

  it("stt: the provider's /audio/transcriptions (multipart), $0.02", async () => {
    const h = await session();
    const bytes = Buffer.from('fake mp3 bytes \u0000\u0001');
    const res = await gw(h, { plugin: 'stt', audio: bytes.toString('base64'), filename: 'clip.mp3', language: 'en' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().message).toBe(`transcribed ${bytes.length} bytes`);
    const got = audio.transcriptions.at(-1)!;
    expect(got.contentType).toMatch(/^multipart\/form-data/);
    expect(got.fields).toMatchObject({ model: 'whisper-1', language: 'en' });
    expect(got.file.equals(bytes)).toBe(true);
    expect(res.headers['x-session-remaining']).toBe('0.98');
  });

  it('a failing audio provider costs nothing (500 internal); bad input is 400', async () => {
    const h = await session();
    audio.fail = true;
    const res = await gw({ ...h, 'x-plugin-id': 'tts' }, { input: 'x' });
    audio.fail = false;
    expect([res.statusCode, res.json().error]).toEqual([500, 'internal']);
    expect((await gw({ ...h, 'x-plugin-id': 'stt' }, { audio: '%%%' })).statusCode).toBe(400);
    expect((await gw({ ...h, 'x-plugin-id': 'tts' }, {})).statusCode).toBe(400);
    const s = await t.web.inject({ method: 'GET', url: '/api/wallet/sessions', headers: { 'x-session-id': h['x-session-id'] } });
    expect(s.json()).toMatchObject({ remaining: '1.00', debits: 1 });
  });

  it('generate-text and agent stream with Accept: text/event-stream; receipt headers come first', async () => {
    for (const plugin of ['generate-text', 'agent']) {
      const h = await session();
      const res = await request(`${base}/api/v1/gateway`, {
        method: 'POST',
        headers: { ...h, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ plugin, messages: [{ role: 'user', content: 'stream me' }] }),
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/text\/event-stream/);
      expect(res.headers['payment-receipt']).toMatch(/^session:ps_/);
      expect(res.headers['x-plugin-id']).toBe(plugin);
      const text = await res.body.text();
      const events = text
        .split('\n\n')
        .filter((b) => b.startsWith('data: '))
        .map((b) => b.slice(6));
      expect(events.at(-1)).toBe('[DONE]');
      const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
      expect(
        parsed
          .filter((e) => e.delta)
          .map((e) => e.delta)
          .join(''),
      ).toBe('Echo: stream me');
      expect(parsed.at(-1)).toMatchObject({ plugin, message: 'Echo: stream me', done: true, payment: { method: 'session' } });
      expect(res.headers['x-session-remaining']).toBe(plugin === 'agent' ? '0.95' : '0.99');
    }
  });

  it('agent without a running agent of the caller answers through the AI layer ($0.05)', async () => {
    const h = await session();
    const res = await gw(h, { messages: [{ role: 'user', content: 'who are you' }] }); // plugin defaults to agent
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ plugin: 'agent', message: 'Echo: who are you' });
    expect(res.headers['x-session-remaining']).toBe('0.95');
  });
});

describe('card method', () => {
  it('an API key caller pays from the card-funded balance of their wallet; none left → 402 payment_required; invalid key → 401', async () => {
    const { cookie } = await signUp(t.web);
    const created = await t.web.inject({ method: 'POST', url: '/api/wallet', headers: { cookie }, payload: { action: 'create' } });
    const address = (created.json() as { address: string }).address.toLowerCase();
    const key = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: { name: 'gw' } });
    expect(key.statusCode, key.body).toBeLessThan(300);
    const raw = (key.json() as { key: string }).key;
    const unpaid = await gw({ authorization: `Bearer ${raw}` }, { plugin: 'generate-text', prompt: 'hi' });
    expect([unpaid.statusCode, unpaid.json().error]).toEqual([402, 'payment_required']);
    await t.platform.services.ledger.credit({ address, amountMicros: 20_000, eventId: `evt_card_${n++}`, source: 'test' });
    const ok1 = await gw({ authorization: `Bearer ${raw}` }, { plugin: 'generate-text', prompt: 'hi' });
    expect(ok1.statusCode, ok1.body).toBe(200);
    expect(ok1.json()).toMatchObject({ payment: { method: 'stripe', receipt: expect.stringMatching(/^gateway:/) } });
    const ok2 = await gw({ cookie }, { plugin: 'generate-text', prompt: 'hi' });
    expect(ok2.statusCode).toBe(200);
    expect((await gw({ cookie }, { plugin: 'generate-text', prompt: 'hi' })).statusCode).toBe(402);
    expect(await t.platform.services.ledger.balance(address)).toBe(0);
    const bad = await gw({ authorization: 'Bearer sk_not_a_key_at_all' }, { plugin: 'generate-text', prompt: 'hi' });
    expect([bad.statusCode, bad.json().error]).toEqual([401, 'Unauthorized']);
  });
});

describe("agent plugin through the caller's running agent", () => {
  it('a signed-in caller with a running agent is answered by its gateway (/v1/chat/completions, gateway token)', async () => {
    const seen: { authorization: string | undefined; body: any }[] = [];
    const agentClient = createServer(async (req, res) => {
      let raw = '';
      for await (const c of req) raw += c;
      seen.push({ authorization: req.headers.authorization, body: JSON.parse(raw) });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Your agent here.' } }],
        }),
      );
    });
    await new Promise<void>((r) => agentClient.listen(0, '127.0.0.1', r));
    try {
      const user = await signUp(t.web);
      const url = `http://127.0.0.1:${(agentClient.address() as AddressInfo).port}`;
      const k = t.database.db.kysely;
      await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url) VALUES ('agent-pay-1', ${user.id}, 'Mine', 'running', 'agent-pay-1', ${url}, ${url})`.execute(
        k,
      );
      await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc) VALUES ('agent-pay-1', ${user.id}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, 'gw-token-123')})`.execute(
        k,
      );
      const h = await session();
      const res = await gw({ ...h, cookie: user.cookie }, { plugin: 'agent', messages: [{ role: 'user', content: 'hello agent' }] });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ plugin: 'agent', message: 'Your agent here.', via: 'agent' });
      expect(seen).toHaveLength(1);
      expect(seen[0]!.authorization).toBe('Bearer gw-token-123');
      expect(seen[0]!.body.messages).toEqual([{ role: 'user', content: 'hello agent' }]);
      // another caller (no agent) is answered by the AI layer
      const other = await gw(h, { plugin: 'agent', messages: [{ role: 'user', content: 'hello agent' }] });
      expect(other.json().message).toBe('Echo: hello agent');
      expect(seen).toHaveLength(1);
    } finally {
      agentClient.closeAllConnections();
      await new Promise((r) => agentClient.close(r));
    }
  });
});
