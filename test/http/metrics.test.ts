/**
 * GET /metrics (docs/metrics.md): absent without METRICS_TOKEN (route and hook), 401 without the
 * token, and with it Prometheus text with request durations by route pattern, process metrics by
 * app, and on the backend the agents, deployment queue, pools and AI provider attempts (through
 * the fake OpenAI-compatible router over real HTTP), and the runs of queued jobs on the app that runs them.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/shared/base-app.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const TOKEN = 'metrics-token-for-tests';
/** `null`: no Authorization header */
const scrape = (app: App, authorization: string | null = `Bearer ${TOKEN}`) =>
  app.inject({ method: 'GET', url: '/metrics', headers: authorization === null ? {} : { authorization } });

/** the value of the one sample of `name` whose labels include all of `labels` (undefined when none) */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** the onResponse hooks Fastify holds on the root instance (no public API lists them) */
function onResponseHooks(app: App): number {
  const key = Object.getOwnPropertySymbols(app).find((s) => s.description === 'fastify.hooks');
  return ((app as unknown as Record<symbol, { onResponse: unknown[] }>)[key!]?.onResponse ?? []).length;
}

let router: FakeOpenAi;
let t: TestPlatform;
beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key' });
  t = await startTestPlatform({ METRICS_TOKEN: TOKEN, ROUTER_API_KEY: 'router-key', ROUTER_BASE_URL: router.url, AI_RATE_LIMIT: '10000' });
});
afterAll(async () => {
  await t?.close();
  await router?.close();
});

describe('without METRICS_TOKEN', () => {
  it('GET /metrics is 404 like any unknown path on both apps, and no metric hook runs', async () => {
    await withTestPlatform({}, async (bare) => {
      for (const app of [bare.web, bare.backend]) {
        const res = await scrape(app);
        expect(res.statusCode).toBe(404);
        expect(res.json()).toEqual((await app.inject({ method: 'GET', url: '/no-such-path' })).json());
        expect(onResponseHooks(app)).toBe(0);
      }
      const doc = (await bare.backend.inject({ method: 'GET', url: '/docs/json' })).json();
      expect(doc.paths['/metrics']).toBeUndefined();
    });
    // the same apps with the token do run it: the count above is not zero by construction
    expect(onResponseHooks(t.web)).toBe(1);
    expect(onResponseHooks(t.backend)).toBe(1);
  });
});

describe('the token', () => {
  it.each([
    ['no header', null],
    ['a wrong token', 'Bearer not-the-token'],
    ['the token without Bearer', TOKEN],
    ['another scheme', `Basic ${TOKEN}`],
    ['the token with a suffix', `Bearer ${TOKEN}x`],
  ])('401 JSON for %s, on both apps', async (_name, authorization) => {
    for (const app of [t.web, t.backend]) {
      const res = await scrape(app, authorization);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
      expect(res.body).not.toContain('http_request_duration_seconds');
    }
  });

  it('is described in the OpenAPI description with its own security scheme', async () => {
    const doc = (await t.backend.inject({ method: 'GET', url: '/docs/json' })).json();
    expect(doc.paths['/metrics'].get.security).toEqual([{ metricsToken: [] }]);
    expect(doc.paths['/metrics'].get.responses['401']).toBeDefined();
    expect(doc.components.securitySchemes.metricsToken).toMatchObject({ type: 'http', scheme: 'bearer' });
  });
});

describe('request durations', () => {
  it('are labelled by route pattern, never by the raw path; unmatched requests share one label', async () => {
    const id = randomUUID();
    const stranger = randomUUID();
    const bearer = { authorization: `Bearer ${t.config.INTERNAL_API_KEY}` };
    const before = sample((await scrape(t.backend)).body, 'http_request_duration_seconds_count', {
      route: '/api/agents/:id',
      method: 'GET',
    });
    await t.backend.inject({ method: 'GET', url: `/api/agents/${id}`, headers: bearer });
    await t.backend.inject({ method: 'GET', url: `/api/agents/${id}`, headers: bearer });
    await t.backend.inject({ method: 'GET', url: `/nothing/here/${stranger}` });
    const wrongMethod = await t.backend.inject({ method: 'PATCH', url: '/health' });
    expect(wrongMethod.statusCode).toBe(405);
    const res = await scrape(t.backend);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.body;
    const labels = { app: 'backend', method: 'GET', route: '/api/agents/:id' };
    const counted = sample(text, 'http_request_duration_seconds_count', labels);
    expect(counted).toBe((before ?? 0) + 2);
    expect(sample(text, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(counted);
    expect(sample(text, 'http_request_duration_seconds_count', { route: 'unmatched', status_code: '404' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'http_request_duration_seconds_count', { route: 'unmatched', status_code: '405', method: 'PATCH' })).toBe(1);
    expect(text).not.toContain(id);
    expect(text).not.toContain(stranger);
  });

  it('each app has its own registry: app label, process metrics, no backend gauges on the web app', async () => {
    await t.web.inject({ method: 'GET', url: '/api/auth/session' });
    const web = (await scrape(t.web)).body;
    const backend = (await scrape(t.backend)).body;
    expect(sample(web, 'http_request_duration_seconds_count', { app: 'web', route: '/api/auth/session' })).toBeGreaterThanOrEqual(1);
    expect(web).not.toContain('app="backend"');
    expect(backend).not.toContain('app="web"');
    for (const text of [web, backend]) {
      expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    }
    expect(web).not.toContain('platform_agents');
    expect(backend).toContain('platform_agents');
  });

  it('a second platform with metrics in the same process registers its own (no duplicate-registration error)', async () => {
    await withTestPlatform({ METRICS_TOKEN: 'other' }, async (other) => {
      expect((await scrape(other.backend, 'Bearer other')).statusCode).toBe(200);
      expect((await scrape(t.backend)).statusCode).toBe(200);
    });
  });
});

describe('backend gauges', () => {
  it('count the agents of every user by status and the deployment queue', async () => {
    const db = t.database.db.kysely;
    const [alice, bob] = [await signUp(t.web), await signUp(t.web)];
    const agent = async (userId: string, status: 'running' | 'stopped' | 'error') => {
      const id = randomUUID();
      const subdomain = `m-${id.slice(0, 8)}`;
      await db
        .insertInto('agents')
        .values({ id, user_id: userId, name: 'metrics', subdomain, url: `https://${subdomain}.example.test`, status })
        .execute();
      return id;
    };
    const running = [await agent(alice.id, 'running'), await agent(alice.id, 'running'), await agent(bob.id, 'running')];
    await agent(bob.id, 'stopped');
    await agent(bob.id, 'error');
    await db
      .insertInto('deployments')
      .values([
        { agent_id: running[0]!, user_id: alice.id, created_at: new Date(Date.now() - 3_600_000) },
        { agent_id: running[2]!, user_id: bob.id },
      ])
      .execute();

    const text = (await scrape(t.backend)).body;
    expect(sample(text, 'platform_agents', { status: 'running' })).toBe(3);
    expect(sample(text, 'platform_agents', { status: 'stopped' })).toBe(1);
    expect(sample(text, 'platform_agents', { status: 'error' })).toBe(1);
    expect(sample(text, 'platform_agents', { status: 'suspended' })).toBe(0);
    expect(sample(text, 'platform_deployment_jobs_queued')).toBe(2);
    const age = sample(text, 'platform_deployment_jobs_oldest_queued_age_seconds')!;
    expect(age).toBeGreaterThanOrEqual(3600);
    expect(age).toBeLessThan(3600 + 300);

    await db.updateTable('agents').set({ status: 'stopped' }).where('id', '=', running[1]!).execute();
    await db.deleteFrom('deployments').execute();
    const after = (await scrape(t.backend)).body;
    expect(sample(after, 'platform_agents', { status: 'running' })).toBe(2);
    expect(sample(after, 'platform_agents', { status: 'stopped' })).toBe(2);
    expect(sample(after, 'platform_deployment_jobs_queued')).toBe(0);
    expect(sample(after, 'platform_deployment_jobs_oldest_queued_age_seconds')).toBe(0);
  });

  it('report the pool: connections, idle ones, waiting queries', async () => {
    const pool = t.database.db.pool;
    const held = await pool.connect();
    try {
      const text = (await scrape(t.backend)).body;
      // the scrape's own count query may hold a second connection while the pool is read
      const total = sample(text, 'platform_db_pool_connections', { pool: 'owner' })!;
      expect(total).toBeGreaterThanOrEqual(1);
      expect(total).toBeLessThanOrEqual(pool.totalCount);
      // the connection held here is never idle
      expect(sample(text, 'platform_db_pool_idle_connections', { pool: 'owner' })).toBeLessThanOrEqual(total - 1);
      expect(sample(text, 'platform_db_pool_waiting_clients', { pool: 'owner' })).toBe(0);
    } finally {
      held.release();
    }
  });

  it('a database that does not answer in time leaves the gauges out, counts a failure, and the scrape still answers', async () => {
    const locker = new pg.Client({ connectionString: t.database.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE agents IN ACCESS EXCLUSIVE MODE');
      const res = await scrape(t.backend);
      expect(res.statusCode).toBe(200);
      expect(sample(res.body, 'platform_agents', { status: 'running' })).toBeUndefined();
      expect(sample(res.body, 'platform_metrics_collect_failures_total')).toBe(1);
      expect(sample(res.body, 'platform_db_pool_connections', { pool: 'owner' })).toBeGreaterThanOrEqual(1);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
    }
    expect(sample((await scrape(t.backend)).body, 'platform_agents', { status: 'running' })).toBeDefined();
  });

  it('time AI provider attempts by provider and outcome, and count fallbacks', async () => {
    router.reset();
    router.failModels.add('deepseek/deepseek-chat');
    const res = await t.backend.inject({
      method: 'POST',
      url: '/api/ai/chat',
      headers: { authorization: `Bearer ${t.config.INTERNAL_API_KEY}`, 'x-user-plan': 'solo', 'x-stripe-subscription-id': 'sub_1' },
      payload: { model: 'deepseek/deepseek-chat', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(res.statusCode).toBe(200);
    const text = (await scrape(t.backend)).body;
    expect(sample(text, 'platform_ai_provider_request_duration_seconds_count', { provider: 'router', outcome: 'error' })).toBe(1);
    expect(sample(text, 'platform_ai_provider_request_duration_seconds_count', { provider: 'router', outcome: 'ok' })).toBe(1);
    expect(sample(text, 'platform_ai_fallbacks_total')).toBe(1);
    // not on the web app's registry, and not labelled by model
    expect((await scrape(t.web)).body).not.toContain('platform_ai_provider');
    expect(text).not.toContain('deepseek');
  });

  it('time the runs of queued jobs by kind and outcome, on the app of the process that runs them', async () => {
    await withTestPlatform({ METRICS_TOKEN: TOKEN, HEARTBEAT_POLL_MS: '20' }, async (p) => {
      // a due heartbeat of an agent that does not exist: the heartbeat job runs it (skipped) and records it
      const user = await signUp(p.web);
      await p.database.db.kysely
        .insertInto('heartbeat_settings')
        .values({
          user_id: user.id,
          agent_id: 'no-such-agent',
          frequency: '1h',
          enabled: true,
          next_heartbeat: new Date(Date.now() - 1000),
        })
        .execute();
      await p.platform.startWorkers();
      await expect
        .poll(async () => sample((await scrape(p.backend)).body, 'platform_job_run_duration_seconds_count', { job: 'heartbeat' }), {
          timeout: 5000,
        })
        .toBe(1);
      const text = (await scrape(p.backend)).body;
      expect(sample(text, 'platform_job_run_duration_seconds_count', { job: 'heartbeat', outcome: 'succeeded' })).toBe(1);
      const row = await p.database.db.kysely.selectFrom('heartbeat_settings').selectAll().executeTakeFirstOrThrow();
      expect(row).toMatchObject({ last_run_status: 'skipped', locked_by: null });
      // the backend's jobs are not on the web app's registry
      expect((await scrape(p.web)).body).not.toContain('job="heartbeat"');
    });
  });
});
