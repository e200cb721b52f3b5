/**
 * The mixed load shared by bench/load-mixed.ts and bench/faults.ts: the platform as child
 * processes on its own PostgreSQL, Redis and model upstream (stack.ts), real credentials made
 * through the API at start (users signed in, an `sk_` key, one local agent), and the routes under
 * load: session reads, sign-ins, key listing, config saves (acknowledged writes, checked in the
 * database afterwards), AI chat through the backend to the upstream, and chat with the agent
 * through the web app's authenticated proxy.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from '../../src/db/embedded.ts';
import { startUpstream } from '../ai-proxy.bench.ts';
import type { ConfigAcks, Done, MixedRoute, Tick } from './mixed-client.ts';
import { type OwnPostgres, type OwnRedis, type PlatformProcess, startOwnPostgres, startOwnRedis, startPlatform } from './stack.ts';

const CLIENT = fileURLToPath(new URL('./mixed-client.ts', import.meta.url));
const INTERNAL_KEY = 'bench-internal-key-0123456789abcdef';
const PASSWORD = 'bench-password-long-enough';

export type Stack = {
  dir: string;
  pg: OwnPostgres;
  redis: OwnRedis;
  upstream: ChildProcess;
  web: string;
  backend: string;
  /** the platform processes: one (`all`) or web and backend */
  processes: Record<string, PlatformProcess>;
  /** starts (again) one app of a split stack */
  startApp(app: 'web' | 'backend' | 'all'): Promise<PlatformProcess>;
  close(): Promise<void>;
};

export async function startStack(dir: string, split: boolean): Promise<Stack> {
  mkdirSync(join(dir, 'data'), { recursive: true });
  const database = await startOwnPostgres(dir);
  let redis: OwnRedis | undefined;
  let upstream: Awaited<ReturnType<typeof startUpstream>> | undefined;
  const processes: Record<string, PlatformProcess> = {};
  try {
    redis = await startOwnRedis(dir);
    upstream = await startUpstream(Number(process.env.BENCH_AI_DELAY_MS ?? 10));
    return await startPlatforms(dir, split, database, redis, upstream, processes);
  } catch (err) {
    // nothing of a failed start is left running
    for (const p of Object.values(processes)) await p.stop('SIGKILL');
    upstream?.proc.kill();
    await redis?.stop();
    await database.stop();
    throw err;
  }
}

async function startPlatforms(
  dir: string,
  split: boolean,
  database: OwnPostgres,
  redis: OwnRedis,
  upstream: Awaited<ReturnType<typeof startUpstream>>,
  processes: Record<string, PlatformProcess>,
): Promise<Stack> {
  const [webPort, backendPort] = [await freePort(), await freePort()];
  const web = `http://127.0.0.1:${webPort}`;
  const backend = `http://127.0.0.1:${backendPort}`;
  const env: Record<string, string> = {
    DATA_DIR: join(dir, 'data'),
    HOST: '127.0.0.1',
    WEB_PORT: String(webPort),
    BACKEND_PORT: String(backendPort),
    PUBLIC_URL: web,
    BACKEND_URL: backend,
    DATABASE_URL: database.ownerUrl,
    DATABASE_REQUEST_URL: database.requestUrl,
    REDIS_URL: redis.url,
    INTERNAL_API_KEY: INTERNAL_KEY,
    // processes sharing DATABASE_URL must share the encryption keys
    WALLET_ENCRYPTION_KEY: 'a'.repeat(64),
    SECRETS_ENCRYPTION_KEY: 'b'.repeat(64),
    HOSTING_DRIVER: 'local',
    AGENT_RUNTIME: 'builtin',
    ROUTER_API_KEY: 'bench-router-key',
    ROUTER_BASE_URL: upstream.base,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    // the bench measures capacity and faults, not the per-IP limits (one client IP here)
    AI_RATE_LIMIT: '1000000000',
    REGISTER_RATE_LIMIT: '1000000000',
    AGENT_GATEWAY_RATE_LIMIT: '1000000000',
  };
  const startApp = async (app: 'web' | 'backend' | 'all') => {
    const p = await startPlatform({
      app,
      env,
      logFile: join(dir, `platform-${app}.log`),
      readyUrl: app === 'backend' ? `${backend}/health` : `${web}/api/health`,
    });
    processes[app] = p;
    return p;
  };
  if (split) {
    // the backend first: it runs the migrations and the deployment worker
    await startApp('backend');
    await startApp('web');
  } else await startApp('all');
  return {
    dir,
    pg: database,
    redis,
    upstream: upstream.proc,
    web,
    backend,
    processes,
    startApp,
    async close() {
      // the web app first, then the backend (it stops the agents it runs), then the services
      for (const name of ['web', 'all', 'backend']) await processes[name]?.stop();
      if (upstream.proc.exitCode === null) upstream.proc.kill();
      await redis.stop();
      await database.stop();
    },
  };
}

export type Credentials = { cookies: string[]; userIds: string[]; emails: string[]; key: string; agentId: string };

const json = async (res: Response) => {
  const text = await res.text();
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as any;
};

/** `users` accounts registered and signed in; the first makes an `sk_` key and provisions a local agent. */
export async function makeCredentials(stack: Stack, users: number): Promise<Credentials> {
  const call = (path: string, method: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${stack.web}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  const cookies: string[] = [];
  const userIds: string[] = [];
  const emails: string[] = [];
  const stamp = Date.now();
  for (let i = 0; i < users; i++) {
    const email = `load${stamp}-${i}@example.com`;
    await json(await call('/api/register', 'POST', { email, password: PASSWORD, name: `Load ${i}` }));
    const login = await call('/api/auth/login', 'POST', { email, password: PASSWORD });
    await json(login);
    const cookie = /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')?.[0];
    if (!cookie) throw new Error('sign-in set no session cookie');
    cookies.push(cookie);
    const me = (await json(await call('/api/auth/session', 'GET', undefined, { cookie }))).user as { id: string } | null;
    if (!me) throw new Error('a fresh session is not recognised');
    userIds.push(me.id);
    emails.push(email);
  }
  const key = (await json(await call('/api/keys', 'POST', { name: 'load' }, { cookie: cookies[0]! }))).key as string;
  const agentId = (await json(await call('/api/agents/provision', 'POST', { name: 'Load' }, { cookie: cookies[0]! }))).agent.id as string;
  await waitAgentRunning(stack, cookies[0]!, agentId, 120_000);
  return { cookies, userIds, emails, key, agentId };
}

export async function waitAgentRunning(stack: Stack, cookie: string, agentId: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const a = (await json(await fetch(`${stack.web}/api/agents/${agentId}`, { headers: { cookie } }))).agent as { status: string };
    if (a.status === 'running') return;
    if (Date.now() > deadline) throw new Error(`agent ${agentId} is ${a.status} after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The route mix; `scale` multiplies every route's concurrency. */
export function mixedRoutes(stack: Stack, c: Credentials, scale = 1): MixedRoute[] {
  const n = (x: number) => Math.max(1, Math.round(x * scale));
  const chat = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] });
  return [
    { name: 'GET /api/auth/session', method: 'GET', url: `${stack.web}/api/auth/session`, cookies: c.cookies, concurrency: n(4) },
    {
      name: 'POST /api/auth/login',
      method: 'POST',
      url: `${stack.web}/api/auth/login`,
      headers: { 'content-type': 'application/json' },
      // the last user signs in again and again (argon2id: the CPU-heavy route)
      body: JSON.stringify({ email: c.emails[c.emails.length - 1], password: PASSWORD }),
      concurrency: n(1),
    },
    { name: 'GET /api/keys', method: 'GET', url: `${stack.web}/api/keys`, cookies: c.cookies, concurrency: n(2) },
    {
      name: 'POST /api/config',
      method: 'POST',
      url: `${stack.web}/api/config`,
      headers: { 'content-type': 'application/json' },
      // one worker per user: a user's saves are serialised by the platform, one in flight each
      cookies: c.cookies,
      concurrency: c.cookies.length,
      kind: 'config',
    },
    {
      name: 'POST /api/ai/chat (backend)',
      method: 'POST',
      url: `${stack.backend}/api/ai/chat`,
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${INTERNAL_KEY}`,
        'x-user-id': c.userIds[0]!,
        'x-user-plan': 'network',
        'x-stripe-subscription-id': 'sub_bench',
      },
      body: chat,
      concurrency: n(4),
    },
    {
      name: 'POST /api/agents/:id/v1/chat/completions',
      method: 'POST',
      url: `${stack.web}/api/agents/${c.agentId}/v1/chat/completions`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${c.key}` },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] }),
      concurrency: n(2),
    },
  ];
}

export type LoadRun = { ticks: Tick[]; done: Promise<Done>; stop(): void };

/** Runs the load client for `durationS`; ticks arrive as they come (the fault phases read them live). */
export function runLoad(routes: MixedRoute[], durationS: number, timeoutMs = 10_000): LoadRun {
  const child = spawn(process.execPath, [CLIENT, JSON.stringify({ routes, durationS, timeoutMs })], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const ticks: Tick[] = [];
  let buf = '';
  let err = '';
  let finished: Done | undefined;
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i = buf.indexOf('\n');
    while (i !== -1) {
      const line = JSON.parse(buf.slice(0, i)) as Tick | Done;
      buf = buf.slice(i + 1);
      if (line.type === 'tick') ticks.push(line);
      else finished = line;
      i = buf.indexOf('\n');
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const done = new Promise<Done>((resolve, reject) =>
    child.on('close', (code) =>
      finished ? resolve(finished) : reject(new Error(`load client exited (${code}): ${err.trim().slice(-500)}`)),
    ),
  );
  return { ticks, done, stop: () => child.stdin!.end() };
}

/**
 * Acknowledged config saves against the database: for each user the stored `bench.seq` must be
 * the last one answered 2xx, or one sent after it that got no answer (it may have committed).
 */
export async function checkConfigWrites(
  superuserUrl: string,
  userIds: string[],
  acks: ConfigAcks[],
): Promise<{ checked: number; lost: { user: string; stored: number | null; lastAcked: number }[] }> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const lost: { user: string; stored: number | null; lastAcked: number }[] = [];
    for (const a of acks) {
      const userId = userIds[a.worker % userIds.length]!;
      const r = await client.query<{ seq: string | null }>(`SELECT config->'bench'->>'seq' AS seq FROM agent_configs WHERE user_id = $1`, [
        userId,
      ]);
      const stored = r.rows[0]?.seq == null ? null : Number(r.rows[0].seq);
      const ok = stored === a.lastAcked || (stored !== null && a.unackedAfter.includes(stored)) || (a.lastAcked === 0 && stored === null);
      if (!ok) lost.push({ user: userId, stored, lastAcked: a.lastAcked });
    }
    return { checked: acks.length, lost };
  } finally {
    await client.end();
  }
}
