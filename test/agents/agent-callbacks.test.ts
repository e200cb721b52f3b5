/**
 * POST /api/agent-callbacks/messages (backend): agents report chat turns with their own scoped
 * platform key (docs/architecture.md rule 6); the messages show in GET /api/agents/:id/messages (§4.7).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;
let owner: Awaited<ReturnType<typeof subscriber>>;
let other: Awaited<ReturnType<typeof subscriber>>;
let agentId: string;
let key: string;

beforeAll(async () => {
  t = await startAgentsPlatform();
  owner = await subscriber(t, 'collective');
  other = await subscriber(t, 'collective');
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/agents/provision',
    headers: { cookie: owner.cookie },
    payload: { name: 'Reporter' },
  });
  expect(res.statusCode).toBe(201);
  agentId = res.json().agent.id;
  const spec = await eventually(async () => t.driver.deploys.find((s) => s.agentId === agentId));
  key = spec.platformApiKey;
});
afterAll(() => t.close());

const report = (headers: Record<string, string>, payload: unknown) =>
  t.backend.inject({ method: 'POST', url: '/api/agent-callbacks/messages', headers, payload: payload as object });
const turn = {
  messages: [
    { sender: 'user', content: 'hello agent', platform: 'api' },
    { sender: 'agent', content: 'hello human', platform: 'api', responseMs: 12 },
  ],
};

describe('agent callbacks', () => {
  it('stores a turn under the agent the key belongs to; the owner sees it in §4.7 messages', async () => {
    const res = await report({ authorization: `Bearer ${key}` }, turn);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ agentId, stored: 2 });
    const list = await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}/messages`, headers: { cookie: owner.cookie } });
    expect(list.statusCode).toBe(200);
    const contents = list
      .json()
      .messages.map((m: { content: string }) => m.content)
      .sort();
    expect(contents).toEqual(['hello agent', 'hello human']);
    expect(
      (await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}/messages`, headers: { cookie: other.cookie } })).statusCode,
    ).toBe(404);
  });

  it.each([
    ['no Authorization header', {}],
    ['not a Bearer token', { authorization: `Basic ${key}` }],
    ['an unknown key', { authorization: 'Bearer apk_not-a-real-key' }],
    // the platform's own key is not an agent key: agents never hold it
    ['the internal API key', () => bearer(t)],
  ])('401 with %s, and nothing stored', async (_label, headers) => {
    const before = await t.database.db.kysely
      .selectFrom('agent_messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const h = typeof headers === 'function' ? headers() : headers;
    const res = await report(h as Record<string, string>, turn);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
    const after = await t.database.db.kysely
      .selectFrom('agent_messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });

  it('an unknown key is 401 before the body is validated (the agentKey scope checks the key first)', async () => {
    for (const payload of [{ messages: [] }, { messages: 'nope' }, 'not json']) {
      const res = await report({ authorization: 'Bearer apk_not-a-real-key', 'content-type': 'application/json' }, payload);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
  });

  it.each([
    ['no messages', { messages: [] }],
    ['not an array', { messages: 'hi' }],
    ['an unknown sender', { messages: [{ sender: 'admin', content: 'x' }] }],
    ['empty content', { messages: [{ sender: 'user', content: '' }] }],
    ['content over the cap', { messages: [{ sender: 'user', content: 'x'.repeat(32_001) }] }],
    ['too many messages', { messages: Array.from({ length: 21 }, () => ({ sender: 'user', content: 'x' })) }],
    ['a negative responseMs', { messages: [{ sender: 'agent', content: 'x', responseMs: -1 }] }],
  ])('400 JSON for %s', async (_label, payload) => {
    const res = await report({ authorization: `Bearer ${key}` }, payload);
    expect(res.statusCode).toBe(400);
    expect(typeof res.json().error).toBe('string');
  });

  it('a body cannot redirect messages to another agent: the key decides', async () => {
    const res = await report(
      { authorization: `Bearer ${key}` },
      { messages: [{ sender: 'user', content: 'mine', agentId: 'someone-else' }] },
    );
    expect(res.statusCode).toBe(201);
    expect(res.json().agentId).toBe(agentId);
  });
});
