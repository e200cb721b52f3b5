/** §4.7 backend agent API, §4.18 deployments / lifecycle / runtime instances, per-agent credentials. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { decryptSecret, sha256 } from '../../src/lib/crypto.ts';
import { signUp, TEST_SECRETS, withTestPlatform } from '../helpers/platform.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform } from './helpers.ts';

let t: AgentsTestPlatform;
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await startAgentsPlatform();
  alice = (await signUp(t.web)).id;
  bob = (await signUp(t.web)).id;
});
afterAll(() => t.close());

const as = (userId: string) => ({ ...bearer(t), 'x-user-id': userId });
const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, userId: string | null, payload?: unknown) =>
  t.backend.inject({
    method,
    url,
    headers: userId ? as(userId) : bearer(t),
    ...(payload !== undefined ? { payload: payload as object } : {}),
  });

async function deployAndWait(userId: string, body: Record<string, unknown> = {}) {
  const res = await inject('POST', '/api/deployments', userId, { userId, name: 'Deployed', ...body });
  expect(res.statusCode).toBe(202);
  const id = res.json().agent.id as string;
  await eventually(async () => (await inject('GET', `/api/agents/${id}`, userId)).json().status === 'running');
  return { id, deployment: res.json().deployment };
}

describe('bearer key (§5)', () => {
  it('401 without a header, 401 without the Bearer prefix, 403 for a wrong key', async () => {
    expect((await t.backend.inject({ method: 'GET', url: '/api/agents' })).statusCode).toBe(401);
    expect((await t.backend.inject({ method: 'GET', url: '/api/agents', headers: { authorization: 'test-internal-key' } })).json()).toEqual(
      { error: 'Unauthorized' },
    );
    const wrong = await t.backend.inject({
      method: 'POST',
      url: '/api/deployments',
      headers: { authorization: 'Bearer nope' },
      payload: { name: 'x' },
    });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toEqual({ error: 'Forbidden' });
  });

  it('500 Server misconfigured when INTERNAL_API_KEY is unset', async () => {
    await withTestPlatform({ INTERNAL_API_KEY: '' }, async (bare) => {
      const res = await bare.backend.inject({ method: 'GET', url: '/api/agents', headers: { authorization: 'Bearer x' } });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ error: 'Server misconfigured' });
    });
  });

  it('400 with a malformed acting user (without one: the operator account, test/agents/agents-ops.test.ts)', async () => {
    const bad = await t.backend.inject({ method: 'GET', url: '/api/agents', headers: { ...bearer(t), 'x-user-id': "1' or 1=1" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'Invalid user id' });
  });
});

describe('agent records (§4.7 backend)', () => {
  it('POST creates a pending agent at <id>.<AGENTS_DOMAIN>; GET lists a flat array', async () => {
    const res = await inject('POST', '/api/agents', null, {
      name: '  Scout  ',
      userId: bob,
      config: { plan: 'collective', aiProvider: 'router' },
    });
    expect(res.statusCode).toBe(201);
    const a = res.json();
    expect(a).toMatchObject({ name: 'Scout', status: 'pending', agentId: a.id });
    expect(a.subdomain).toBe(`${a.id}.agents.localhost`);
    expect(a.url).toBe(`https://${a.subdomain}`);
    expect(Number.isNaN(Date.parse(a.createdAt))).toBe(false);

    const list = await inject('GET', '/api/agents', bob);
    expect(list.statusCode).toBe(200);
    expect(Array.isArray(list.json())).toBe(true);
    expect(list.json()[0]).toEqual({
      id: a.id,
      name: 'Scout',
      status: 'pending',
      created: a.createdAt,
      subdomain: a.subdomain,
      url: a.url,
    });

    const one = (await inject('GET', `/api/agents/${a.id}`, bob)).json();
    expect(one).toMatchObject({
      id: a.id,
      status: 'pending',
      plan: 'collective',
      aiProvider: 'router',
      verified: false,
      verificationType: null,
      attestationUid: null,
    });
    // nothing was deployed for a pending agent
    expect(t.driver.calls.filter((c) => c.agentId === a.id)).toEqual([]);
  });

  it("another user's agent is 404 on read, update and lifecycle; delete touches nothing", async () => {
    const a = (await inject('POST', '/api/agents', bob, { name: 'Private' })).json();
    expect((await inject('GET', `/api/agents/${a.id}`, alice)).statusCode).toBe(404);
    expect((await inject('PUT', `/api/agents/${a.id}`, alice, { plan: 'solo' })).statusCode).toBe(404);
    expect((await inject('POST', `/api/agents/${a.id}/stop`, alice)).statusCode).toBe(404);
    expect((await inject('GET', `/api/agents/${a.id}/logs`, alice)).statusCode).toBe(404);
    const del = await inject('DELETE', `/api/agents/${a.id}`, alice);
    expect(del.json()).toEqual({ id: a.id, deleted: true });
    expect((await inject('GET', `/api/agents/${a.id}`, bob)).statusCode).toBe(200);
    expect(t.driver.calls.some((c) => c.op === 'delete' && c.agentId === a.id)).toBe(false);
  });

  it('PUT updates plan, provider and config', async () => {
    const a = (await inject('POST', '/api/agents', bob, { name: 'Tune' })).json();
    const res = await inject('PUT', `/api/agents/${a.id}`, bob, { plan: 'network', aiProvider: 'openai', config: { tone: 'dry' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      id: a.id,
      plan: 'network',
      aiProvider: 'openai',
      subdomain: a.subdomain,
      status: 'pending',
      message: 'Agent updated',
      config: { tone: 'dry' },
    });
    expect((await inject('PUT', '/api/agents/a-missing-agent', bob, {})).statusCode).toBe(404);
  });

  it('DELETE of an unknown id succeeds', async () => {
    const res = await inject('DELETE', '/api/agents/nobody-has-this', bob);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: 'nobody-has-this', deleted: true });
  });

  it('backend plan limits: solo 1 → 402 AGENT_LIMIT_REACHED', async () => {
    const u = (await signUp(t.web)).id;
    expect((await inject('POST', '/api/agents', u, { name: 'one', config: { plan: 'solo' } })).statusCode).toBe(201);
    const res = await inject('POST', '/api/agents', u, { name: 'two', config: { plan: 'solo' } });
    expect(res.statusCode).toBe(402);
    expect(res.json()).toMatchObject({ code: 'AGENT_LIMIT_REACHED', limit: 1, current: 1 });
    expect(typeof res.json().error).toBe('string');
    const dep = await inject('POST', '/api/deployments', u, { name: 'three', plan: 'solo' });
    expect(dep.statusCode).toBe(402);
    expect(dep.json().code).toBe('AGENT_LIMIT_REACHED');
  });

  it('an unknown user is 404', async () => {
    const res = await inject('POST', '/api/agents', '00000000-0000-4000-8000-000000000000', { name: 'ghost' });
    expect(res.statusCode).toBe(404);
  });
});

describe('deployments (§4.18) and per-agent credentials', () => {
  it('POST /api/deployments answers 202 with the job; the worker deploys and the agent runs', async () => {
    const res = await inject('POST', '/api/deployments', null, {
      userId: alice,
      name: 'Worker bee',
      plan: 'collective',
      model: 'gpt-4',
      aiProvider: 'router',
      config: { greeting: 'hi' },
    });
    expect(res.statusCode).toBe(202);
    const { deployment, agent } = res.json();
    // §4.7's gpt-4 runs the most capable OpenAI model the owner may use (docs/agents.md "Model")
    expect(agent).toMatchObject({ status: 'provisioning', plan: 'collective', model: 'openai/gpt-4.1', config: { greeting: 'hi' } });
    expect(deployment).toMatchObject({ agentId: agent.id, action: 'deploy', status: 'queued', maxAttempts: LIMITS.deploymentMaxAttempts });

    await eventually(async () => (await inject('GET', `/api/agents/${agent.id}`, alice)).json().status === 'running');
    const job = (await inject('GET', `/api/deployments/${deployment.id}`, alice)).json();
    expect(job).toMatchObject({ status: 'succeeded', attempts: 1, lastError: null });
    expect((await inject('GET', `/api/deployments/${deployment.id}`, bob)).statusCode).toBe(404);
    const after = (await inject('GET', `/api/agents/${agent.id}`, alice)).json();
    expect(after.startedAt).not.toBeNull();
    expect(after.gatewayUrl).toBe(`http://127.0.0.1:1/${agent.id}`);
  });

  it('each agent gets its own gateway token (48 chars, stored encrypted) and platform key (hash only); no platform secret', async () => {
    const a = await deployAndWait(alice, { name: 'Creds' });
    const spec = t.driver.deploys.find((s) => s.agentId === a.id)!;
    expect(spec.gatewayToken).toMatch(/^[0-9a-f]{48}$/);
    expect(spec.platformApiKey).toMatch(/^apk_/);
    expect(spec.backendUrl).toBe(t.backendUrl);
    const leaked = JSON.stringify(spec);
    expect(leaked).not.toContain(t.config.INTERNAL_API_KEY!);
    expect(leaked).not.toContain(t.database.url);
    expect(Object.keys(spec.env ?? {})).not.toEqual(expect.arrayContaining(['DATABASE_URL']));
    for (const k of ['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY']) expect(spec.env?.[k]).toBeUndefined();

    const row = await t.database.db.kysely
      .selectFrom('agent_credentials')
      .selectAll()
      .where('agent_id', '=', a.id)
      .executeTakeFirstOrThrow();
    expect(row.gateway_token_enc).not.toContain(spec.gatewayToken);
    expect(decryptSecret(TEST_SECRETS.secretsEncryptionKey, row.gateway_token_enc)).toBe(spec.gatewayToken);
    expect(row.platform_key_hash!.equals(sha256(spec.platformApiKey))).toBe(true);
    expect(await t.platform.services.agentCallbacks.verifyPlatformKey(spec.platformApiKey)).toEqual({
      agentId: a.id,
      userId: alice,
      model: (await inject('GET', `/api/agents/${a.id}`, alice)).json().model,
    });
    expect(await t.platform.services.agentCallbacks.verifyPlatformKey('apk_wrong')).toBeNull();

    const other = await deployAndWait(alice, { name: 'Creds 2' });
    const spec2 = t.driver.deploys.find((s) => s.agentId === other.id)!;
    expect(spec2.gatewayToken).not.toBe(spec.gatewayToken);
    expect(spec2.platformApiKey).not.toBe(spec.platformApiKey);
  });

  it('a deploy that keeps failing is retried, then the agent shows error', async () => {
    const u = (await signUp(t.web)).id;
    const agent = (await inject('POST', '/api/agents', u, { name: 'Doomed' })).json();
    t.driver.failDeploys.add(agent.id);
    // retries are backed off; make them due at once so the test does not wait
    const res = await inject('POST', `/api/agents/${agent.id}/start`, u);
    expect(res.json()).toMatchObject({ status: 'provisioning', deployment: { status: 'queued' } });
    await eventually(async () => {
      await t.database.db.kysely
        .updateTable('deployments')
        .set({ run_after: new Date(0) })
        .where('agent_id', '=', agent.id)
        .where('status', '=', 'queued')
        .execute();
      return (await inject('GET', `/api/agents/${agent.id}`, u)).json().status === 'error';
    });
    const job = (await inject('GET', `/api/deployments/${res.json().deployment.id}`, u)).json();
    expect(job).toMatchObject({ status: 'failed', attempts: LIMITS.deploymentMaxAttempts, lastError: 'fake deploy failed' });
    expect(t.driver.calls.filter((c) => c.op === 'deploy' && c.agentId === agent.id)).toHaveLength(LIMITS.deploymentMaxAttempts);
  });
});

describe('lifecycle, logs, stats, runtime instances', () => {
  it('stop ends the unit (revoking the key); start and restart deploy again from the stored record with a fresh key; start of a running agent does nothing', async () => {
    const { id } = await deployAndWait(alice, { name: 'Cycle' });
    const firstKey = t.driver.deploys.findLast((s) => s.agentId === id)!.platformApiKey;
    const stop = await inject('POST', `/api/agents/${id}/stop`, alice);
    expect(stop.json()).toEqual({ id, action: 'stop', status: 'stopped', deployment: null });
    // the driver's stop, never its suspend (docs/agents.md "Stop, suspend and restart")
    expect(t.driver.units.get(id)!.status).toBe('stopped');
    expect(t.driver.calls.filter((c) => c.agentId === id && c.op === 'suspend')).toEqual([]);
    expect((await inject('GET', `/api/agents/${id}`, alice)).json().status).toBe('stopped');

    // a stopped agent's key is revoked (docs/agents.md "Model access"): starting deploys with a fresh one
    expect((await inject('POST', `/api/agents/${id}/start`, alice)).json()).toMatchObject({
      status: 'provisioning',
      deployment: { action: 'deploy' },
    });
    await eventually(async () => (await inject('GET', `/api/agents/${id}`, alice)).json().status === 'running');
    expect(t.driver.units.get(id)!.status).toBe('healthy');
    const secondKey = t.driver.deploys.findLast((s) => s.agentId === id)!.platformApiKey;
    expect(secondKey).not.toBe(firstKey);

    // start of an agent that runs: nothing happens
    const deploys = t.driver.deploys.length;
    expect((await inject('POST', `/api/agents/${id}/start`, alice)).json()).toEqual({
      id,
      action: 'start',
      status: 'running',
      deployment: null,
    });
    expect(t.driver.deploys.length).toBe(deploys);

    // restart: deployed again with the configuration stored now
    await inject('PUT', `/api/agents/${id}`, alice, { config: { systemPrompt: 'new persona' } });
    expect((await inject('POST', `/api/agents/${id}/restart`, alice)).json()).toMatchObject({
      action: 'restart',
      status: 'provisioning',
      deployment: { action: 'deploy' },
    });
    await eventually(async () => (await inject('GET', `/api/agents/${id}`, alice)).json().status === 'running');
    const redeployed = t.driver.deploys.findLast((s) => s.agentId === id)!;
    expect(redeployed.config).toMatchObject({ systemPrompt: 'new persona' });
    expect(redeployed.platformApiKey).not.toBe(secondKey);

    t.driver.units.delete(id);
    const re = await inject('POST', `/api/agents/${id}/start`, alice);
    expect(re.json()).toMatchObject({ status: 'provisioning', deployment: { action: 'deploy' } });
    await eventually(async () => t.driver.units.has(id) && (await inject('GET', `/api/agents/${id}`, alice)).json().status === 'running');
  });

  it('logs come from the driver (limit, level); stats are live', async () => {
    const { id } = await deployAndWait(alice, { name: 'Chatty' });
    const logs = await inject('GET', `/api/agents/${id}/logs?limit=1`, alice);
    expect(logs.statusCode).toBe(200);
    expect(logs.json().logs).toHaveLength(1);
    const warn = (await inject('GET', `/api/agents/${id}/logs?level=warn`, alice)).json().logs;
    expect(warn).toEqual([expect.objectContaining({ level: 'warn', message: 'no channels configured', source: 'runtime' })]);
    expect((await inject('GET', `/api/agents/${id}/logs?limit=101`, alice)).statusCode).toBe(400);
    const stats = (await inject('GET', `/api/agents/${id}/stats`, alice)).json().stats;
    expect(stats).toMatchObject({ cpu: 1.5, memory: 50_000_000, pids: 1, status: 'healthy' });
  });

  it("runtime instances: a user's own, or all without x-user-id", async () => {
    const { id } = await deployAndWait(bob, { name: 'Listed' });
    const mine = (await inject('GET', '/api/runtime-instances', bob)).json();
    expect(mine.instances.every((i: { userId: string }) => i.userId === bob)).toBe(true);
    expect(mine.instances.find((i: { agentId: string }) => i.agentId === id)).toMatchObject({
      status: 'running',
      containerStatus: 'healthy',
      driver: 'local',
    });
    const all = (await inject('GET', '/api/runtime-instances?limit=100', null)).json();
    expect(all.instances.some((i: { userId: string }) => i.userId === alice)).toBe(true);
    expect(all.count).toBe(all.instances.length);
  });
});

describe('hosting unavailable (§4.12)', () => {
  it('provisioning answers 500 and the other endpoints keep working', async () => {
    const down = await startAgentsPlatform({ env: { HOSTING_DRIVER: 'render' } });
    try {
      const u = (await signUp(down.web)).id;
      const h = { ...bearer(down), 'x-user-id': u };
      const dep = await down.backend.inject({ method: 'POST', url: '/api/deployments', headers: h, payload: { userId: u, name: 'x' } });
      expect(dep.statusCode).toBe(500);
      expect(dep.json()).toEqual({ error: 'Hosting unavailable', code: 'HOSTING_UNAVAILABLE' });
      const created = await down.backend.inject({ method: 'POST', url: '/api/agents', headers: h, payload: { name: 'meta only' } });
      expect(created.statusCode).toBe(201);
      expect((await down.backend.inject({ method: 'GET', url: '/api/agents', headers: h })).statusCode).toBe(200);
      expect((await down.backend.inject({ method: 'GET', url: `/api/agents/${created.json().id}`, headers: h })).statusCode).toBe(200);
      expect((await down.backend.inject({ method: 'POST', url: `/api/agents/${created.json().id}/start`, headers: h })).statusCode).toBe(
        500,
      );
      expect((await down.backend.inject({ method: 'DELETE', url: `/api/agents/${created.json().id}`, headers: h })).json()).toEqual({
        id: created.json().id,
        deleted: true,
      });
      expect((await down.backend.inject({ method: 'GET', url: '/health' })).json()).toMatchObject({ provisioning: 'disabled' });
    } finally {
      await down.close();
    }
  });

  it('a driver that cannot reach its platform: 500 on driver calls, records still served', async () => {
    const { id } = await deployAndWait(alice, { name: 'Offline' });
    t.driver.unreachable = true;
    try {
      expect((await inject('GET', `/api/agents/${id}/stats`, alice)).json()).toEqual({
        error: 'Hosting unavailable',
        code: 'HOSTING_UNAVAILABLE',
      });
      // stop reaches the driver at once (a restart is a deployment job, retried while hosting is down)
      expect((await inject('POST', `/api/agents/${id}/stop`, alice)).statusCode).toBe(500);
      expect((await inject('GET', `/api/agents/${id}`, alice)).statusCode).toBe(200);
      const inst = (await inject('GET', '/api/runtime-instances', alice)).json();
      expect(inst.instances.find((i: { agentId: string }) => i.agentId === id).containerStatus).toBeNull();
    } finally {
      t.driver.unreachable = false;
    }
  });
});
