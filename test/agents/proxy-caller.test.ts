/**
 * Who may call the gateway proxy (docs/agents.md "Talk to your agent"; docs/architecture.md
 * "Routes and scopes"): the account scope decides it before anything else, with the proxy's own
 * 401 texts, and a cookie WebSocket from another site's page is refused by the credential the
 * scope found, not by which headers happen to be there.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const MISSING = 'Sign in, or send one of your API keys as `Authorization: Bearer sk_…`';

let t: TestPlatform;
let wsBase: string;
let user: { cookie: string; key: string };

beforeAll(async () => {
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '100000' });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  wsBase = `ws://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
  const u = await signUp(t.web);
  const created = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: u.cookie }, payload: { name: 'k' } });
  user = { cookie: u.cookie, key: created.json().key };
});
afterAll(async () => {
  // nothing the refused or failed upgrades opened stays watched
  expect(t.web.getDecorator<{ size: number }>('streamRevoker').size).toBe(0);
  await t?.close();
});

const post = (url: string, headers: Record<string, string>) =>
  t.web.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload: '{"not json' });

describe('the proxy in the account scope', () => {
  it('no credential: 401 with the sentence naming both, on documented and pass-through paths alike, before the body is read', async () => {
    for (const url of ['/api/agents/any-agent/v1/chat/completions', '/api/agents/any-agent/v1/embeddings']) {
      const res = await post(url, {});
      expect(res.statusCode, url).toBe(401);
      expect(res.json(), url).toEqual({ error: MISSING });
    }
    const models = await t.web.inject({ method: 'GET', url: '/api/agents/any-agent/v1/models' });
    expect(models.json()).toEqual({ error: MISSING });
  });

  it('a key that is not a valid sk_ key: 401 Invalid API key, even beside a valid session cookie', async () => {
    for (const key of ['sk_not-a-real-key-000000000000', 'apk_an-agent-key', 'not-a-key']) {
      const res = await post('/api/agents/any-agent/v1/chat/completions', { authorization: `Bearer ${key}`, cookie: user.cookie });
      expect(res.statusCode, key).toBe(401);
      expect(res.json(), key).toEqual({ error: 'Invalid API key' });
    }
  });

  it('a valid key or session gets past the scope: an agent that is not the caller’s is 404', async () => {
    const byKey = await post('/api/agents/no-such-agent/v1/chat/completions', { authorization: `Bearer ${user.key}` });
    expect(byKey.statusCode).toBe(404);
    const byCookie = await t.web.inject({ method: 'GET', url: '/api/agents/no-such-agent/v1/models', headers: { cookie: user.cookie } });
    expect(byCookie.statusCode).toBe(404);
  });

  it('the other account routes keep their plain 401 text', async () => {
    const res = await t.web.inject({
      method: 'GET',
      url: '/api/agents',
      headers: { authorization: 'Bearer sk_not-a-real-key-000000000000' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });
});

/**
 * The status the upgrade of `/api/agents/<agentId>/ws` is answered with (101 when it opens); a
 * refused upgrade counts once the server has also closed its connection (within 2 s), as a
 * refusal must not leave it open.
 */
const upgrade = (agentId: string, headers: Record<string, string>) =>
  new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(`${wsBase}/api/agents/${agentId}/ws`, { headers });
    socket.on('unexpected-response', (_req, res) => {
      res.resume();
      const left = setTimeout(() => {
        res.destroy();
        reject(new Error(`HTTP ${res.statusCode}, and the server left the connection open`));
      }, 2000);
      res.socket.once('close', () => {
        clearTimeout(left);
        resolve(res.statusCode ?? 0);
      });
    });
    socket.on('open', () => {
      socket.close();
      resolve(101);
    });
    socket.on('error', () => {});
  });

describe('cross-site WebSockets (CSWSH)', () => {
  const evil = { origin: 'https://evil.example' };

  it('a cookie socket from another site is 403, also when a non-Bearer Authorization header rides along', async () => {
    expect(await upgrade('no-such-agent', { ...evil, cookie: user.cookie })).toBe(403);
    expect(await upgrade('no-such-agent', { ...evil, cookie: user.cookie, authorization: 'Basic dXNlcjpwYXNz' })).toBe(403);
  });

  it('a key socket from any origin is not refused as cross-site (the page cannot have the key): it reaches the agent look-up', async () => {
    expect(await upgrade('no-such-agent', { ...evil, authorization: `Bearer ${user.key}` })).toBe(404);
    expect(await upgrade('no-such-agent', { cookie: user.cookie })).toBe(404);
  });

  it('no credential is 401 and a wrong key 401 before anything else', async () => {
    expect(await upgrade('no-such-agent', evil)).toBe(401);
    expect(await upgrade('no-such-agent', { authorization: 'Bearer sk_not-a-real-key-000000000000' })).toBe(401);
  });
});
