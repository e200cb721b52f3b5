/**
 * The agent gateway client (src/domains/agents/gateway/): a cached address that stops answering is
 * looked up again once (the agent restarted elsewhere), an agent that cannot be reached is 502
 * AGENT_UNAVAILABLE, and the `agent` plugin's target is the user's oldest running agent; a model
 * refusal the agent passes on keeps the catalogue's status for its code, and nothing else does.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { createAgentClient } from '../../src/domains/agents/agent-client/agent.client.ts';
import { type AgentTarget, type AgentTargets, createAgentTargets } from '../../src/domains/agents/agent-client/targets.service.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import type { AppError } from '../../src/lib/errors.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';

let t: TestDatabase;
let gateway: Server;
let liveUrl: string;
let userId: string;
const seen: (string | undefined)[] = [];

async function addAgent(id: string, status: string, url: string | null, createdAt: string) {
  const k = t.db.kysely;
  await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url, created_at)
            VALUES (${id}, ${userId}, ${id}, ${status}, ${id}, ${url}, ${url}, ${createdAt}::timestamptz)`.execute(k);
  await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc)
            VALUES (${id}, ${userId}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, `token-${id}`)})`.execute(k);
}

/** An address nothing listens on: a server bound, then closed. */
async function deadUrl() {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  t = await createTestDatabase();
  gateway = createServer((req, res) => {
    seen.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', r));
  liveUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  const r = await sql<{
    id: string;
  }>`INSERT INTO users (email, name, referral_code) VALUES ('gw@example.com', 'Gw', 'GWREF') RETURNING id`.execute(t.db.kysely);
  userId = r.rows[0]!.id;
}, 60_000);

afterAll(async () => {
  await new Promise<void>((r) => gateway.close(() => r()));
  await t?.drop();
});

describe('agent gateway client', () => {
  it('forward: a cached address that no longer answers is looked up again once', async () => {
    const client = createAgentClient({
      targets: createAgentTargets({ db: t.db, secretsKey: TEST_SECRETS.secretsEncryptionKey, ttlMs: 60_000 }),
    });
    try {
      await addAgent('agent-moved', 'running', await deadUrl(), '2026-01-01T00:00:00Z');
      // cached at the old address, then the agent moves
      await client.targets.byId(userId, 'agent-moved');
      await sql`UPDATE agents SET gateway_url = ${liveUrl} WHERE id = 'agent-moved'`.execute(t.db.kysely);
      seen.length = 0;
      const { target, response } = await client.forward(userId, 'agent-moved', {
        method: 'GET',
        path: '/v1/models?x=1',
        headers: {},
        body: null,
      });
      expect(response.statusCode).toBe(200);
      expect(await response.body.json()).toEqual({ path: '/v1/models?x=1' });
      expect(target.baseUrl).toBe(liveUrl);
      expect(seen).toEqual(['Bearer token-agent-moved']);
    } finally {
      await client.close();
    }
  });

  it('forward: an agent that cannot be reached is 502 AGENT_UNAVAILABLE; a missing one 404', async () => {
    const client = createAgentClient({ targets: createAgentTargets({ db: t.db, secretsKey: TEST_SECRETS.secretsEncryptionKey }) });
    try {
      await addAgent('agent-gone', 'running', await deadUrl(), '2026-01-02T00:00:00Z');
      const req = { method: 'GET' as const, path: '/v1/models', headers: {}, body: null };
      await expect(client.forward(userId, 'agent-gone', req)).rejects.toMatchObject({ code: 'AGENT_UNAVAILABLE', status: 502 });
      await expect(client.forward(userId, 'no-such-agent', req)).rejects.toMatchObject({ status: 404 });
    } finally {
      await client.close();
    }
  });

  it("running: the user's oldest running agent with a gateway address, or none", async () => {
    const targets = createAgentTargets({ db: t.db, secretsKey: TEST_SECRETS.secretsEncryptionKey });
    const other = await sql<{
      id: string;
    }>`INSERT INTO users (email, name, referral_code) VALUES ('none@example.com', 'None', 'NONEREF') RETURNING id`.execute(t.db.kysely);
    expect(await targets.running(other.rows[0]!.id)).toBeUndefined();
    // agent-moved (2026-01-01) is the oldest running one; a stopped older one does not count
    await addAgent('agent-stopped', 'stopped', liveUrl, '2025-12-01T00:00:00Z');
    const t1 = await targets.running(userId);
    expect(t1?.agent.id).toBe('agent-moved');
    expect(t1?.token).toBe('token-agent-moved');
  });
});

describe('an agent\'s refusal, passed on by the client with the catalogue\'s status (docs/agents.md "Talk to your agent")', () => {
  /** What the agent answers next: an HTTP status and OpenAI body for a completion, or a WebSocket error frame. */
  const next: { status: number; body: unknown; headers?: Record<string, string>; frame: Record<string, unknown> } = {
    status: 200,
    body: {},
    frame: {},
  };
  let agent: Server;
  let target: AgentTarget;

  beforeAll(async () => {
    agent = createServer((req, res) => {
      req.resume();
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers }).end(JSON.stringify(next.body));
    });
    const wss = new WebSocketServer({ server: agent });
    wss.on('connection', (ws) => ws.on('message', () => ws.send(JSON.stringify({ type: 'error', ...next.frame }))));
    await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
    const baseUrl = `http://127.0.0.1:${(agent.address() as AddressInfo).port}`;
    target = { agent: { id: 'agent-refusing', name: 'Refusing' } as AgentTarget['agent'], baseUrl, token: 'token-refusing' };
  });
  afterAll(async () => {
    agent.closeAllConnections();
    await new Promise<void>((r) => agent.close(() => r()));
  });

  const client = createAgentClient({ targets: {} as AgentTargets });
  const viaHttp = () => client.streamCompletion(target, { messages: [{ role: 'user', content: 'hi' }] }, () => {});
  const viaWs = () => client.wsChat(target, 'hi', 'main');
  const refusal = (code: string, message: string, extra: Record<string, unknown> = {}) => ({
    error: { message, type: 'x', code, param: null, ...extra },
  });

  it.each([
    ['model_restricted', 403, 'MODEL_RESTRICTED', { allowedModels: ['a/b', 'c/d'] }],
    ['budget_exceeded', 429, 'AGENT_BUDGET_EXCEEDED', {}],
    ['insufficient_quota', 429, 'QUOTA_EXCEEDED', {}],
    ['rate_limit_exceeded', 429, 'AI_RATE_LIMITED', { retryAfter: 7 }],
    ['subscription_required', 402, 'SUBSCRIPTION_REQUIRED', {}],
    ['AGENT_BUSY', 429, 'TOO_MANY_REQUESTS', {}],
  ] as const)('%s → %i %s, with the sentence (HTTP and WebSocket)', async (code, status, id, extra) => {
    next.status = status;
    next.body = refusal(code, `Refused: ${code}`, extra);
    next.frame = { error: `Refused: ${code}`, code, ...extra };
    for (const call of [viaHttp, viaWs]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toMatchObject({ id, status, message: `Refused: ${code}` });
      if (code === 'model_restricted') expect((err as AppError).extra).toEqual({ allowedModels: ['a/b', 'c/d'] });
      if (code === 'rate_limit_exceeded') expect((err as AppError).extra).toEqual({ retryAfter: 7 });
    }
  });

  it('the Retry-After of an HTTP refusal is kept when its body has none', async () => {
    next.status = 429;
    next.body = refusal('AGENT_BUSY', 'This agent is busy');
    next.headers = { 'retry-after': '1' };
    try {
      await expect(viaHttp()).rejects.toMatchObject({ id: 'TOO_MANY_REQUESTS', status: 429, extra: { retryAfter: 1 } });
    } finally {
      next.headers = undefined;
    }
  });

  it('an unknown code, a known code on a 5xx, or a code that is not a string stays a failure of the agent (5xx, its words)', async () => {
    for (const [status, code] of [
      [403, 'permission_error'],
      [502, 'model_restricted'],
      [400, 'hasOwnProperty'],
      [429, 42],
    ] as const) {
      next.status = status;
      next.body = refusal(code as string, 'Nope');
      await expect(viaHttp()).rejects.toMatchObject({
        id: 'AGENT_UNAVAILABLE',
        status: 502,
        message: `The agent answered ${status}: Nope`,
      });
    }
    next.frame = { error: 'Nope', code: 'constructor' };
    await expect(viaWs()).rejects.toMatchObject({ id: 'AGENT_ERROR', status: 500, message: 'Nope' });
  });
});
