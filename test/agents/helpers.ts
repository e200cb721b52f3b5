/**
 * A platform for the agents route tests: both apps, the backend listening on a real loopback
 * port (the web app reaches it over HTTP exactly as in production), the deployment worker
 * running, and a hosting driver the test chooses (the in-memory fake by default).
 */
import { freePort } from '../../src/db/embedded.ts';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import type { PlatformDeps } from '../../src/platform.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { createFakeDriver, type FakeDriver } from './fake-driver.ts';

export type AgentsTestPlatform<D extends HostingDriver = FakeDriver> = TestPlatform & { driver: D; backendUrl: string };

export async function startAgentsPlatform<D extends HostingDriver = FakeDriver>(
  options: { env?: Record<string, string>; driver?: D; startWorkers?: boolean; logger?: PlatformDeps['logger'] } = {},
): Promise<AgentsTestPlatform<D>> {
  const port = await freePort();
  const driver = (options.driver ?? createFakeDriver()) as D;
  const backendUrl = `http://127.0.0.1:${port}`;
  const t = await startTestPlatform(
    {
      BACKEND_URL: backendUrl,
      // the port agents of the local driver reach the platform's AI gateway on (AGENT_GATEWAY_URL's default)
      BACKEND_PORT: String(port),
      ADMIN_EMAILS: 'admin@example.com',
      ADMIN_EMAILS_REQUIRE_VERIFIED: 'false',
      STRIPE_SECRET_KEY: 'sk_test_agents',
      REGISTER_RATE_LIMIT: '100000',
      ...options.env,
    },
    { driver, workerPollMs: 50, ...(options.logger ? { logger: options.logger } : {}) },
  );
  await t.backend.listen({ host: '127.0.0.1', port });
  if (options.startWorkers !== false) await t.platform.startWorkers();
  return Object.assign(t, { driver, backendUrl });
}

/** A signed-up user whose subscription is active (users.subscription_status), on `plan`. */
export async function subscriber(t: TestPlatform, plan: 'solo' | 'collective' | 'label' | 'network' = 'solo', email?: string) {
  const u = await signUp(t.web, email ? { email } : {});
  await t.database.db.kysely.updateTable('users').set({ subscription_status: 'active', plan }).where('id', '=', u.id).execute();
  return u;
}

/** Waits until `check` returns a truthy value (polling), or throws after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, timeoutMs = 10_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export const bearer = (t: TestPlatform) => ({ authorization: `Bearer ${t.config.INTERNAL_API_KEY}` });

type DeploymentJob = { status: string; attempts: number; lastError?: string | null };

/**
 * §4.18 POST /api/deployments for `userId` whose first attempt the test made fail: waits until the
 * job records that failure, then until a retry succeeds. Returns the agent, the failed attempt's
 * message and the attempts the job took.
 */
export async function deployThroughOneFailure(t: TestPlatform, userId: string, name: string) {
  const headers = { ...bearer(t), 'x-user-id': userId };
  const res = await t.backend.inject({ method: 'POST', url: '/api/deployments', headers: bearer(t), payload: { userId, name } });
  if (res.statusCode !== 202) throw new Error(`POST /api/deployments answered ${res.statusCode}: ${res.body}`);
  const { deployment, agent } = res.json() as { deployment: { id: string }; agent: { id: string } };
  const job = async () =>
    (await t.backend.inject({ method: 'GET', url: `/api/deployments/${deployment.id}`, headers })).json() as DeploymentJob;
  const failed = await eventually(async () => {
    const j = await job();
    return j.lastError ? j : undefined;
  }, 15_000);
  const done = await eventually(async () => {
    const j = await job();
    return j.status === 'succeeded' ? j : undefined;
  }, 15_000);
  return { agent, headers, firstError: failed.lastError, attempts: done.attempts };
}
