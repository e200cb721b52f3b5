/**
 * A platform whose agents are the built-in runtime (what the local driver runs), each on a loopback
 * port, started by the test's hosting driver with the deploy's own credentials; their model is the
 * platform's AI gateway in front of the local fake provider. Both apps listen on real sockets, so
 * the official `openai` client and WebSockets reach agents through the web app's proxy as a
 * program would.
 */
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { expect } from 'vitest';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { createGateway } from '../../src/runtime/gateway.ts';
import { createFakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';

export type RuntimePlatform = {
  t: AgentsTestPlatform;
  router: FakeOpenAi;
  /** http://127.0.0.1:<port> of the web app */
  webUrl: string;
  /** a network subscriber with `count` running agents on openai/gpt-4o-mini */
  owner(count: number): Promise<{ id: string; cookie: string; agentIds: string[] }>;
  close(): Promise<void>;
};

export async function startRuntimePlatform(env: Record<string, string> = {}): Promise<RuntimePlatform> {
  const router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  const runtimes = new Map<string, { url: string; close: () => Promise<unknown> }>();
  let t: AgentsTestPlatform | undefined;
  const driver = createFakeDriver();
  const deploy = driver.deploy;
  const status = driver.status;
  driver.deploy = async (spec) => {
    const deployed = await deploy(spec);
    const { app } = await createGateway({
      gatewayToken: spec.gatewayToken,
      agentId: spec.agentId,
      model: {
        baseUrl: `${t!.backendUrl}${MODEL_GATEWAY_PATH}`,
        apiKey: spec.env!.AGENT_MODEL_API_KEY!,
        defaultModel: spec.env!.AGENT_MODEL!,
        timeoutMs: 5_000,
      },
      logger: pino({ level: 'silent' }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    runtimes.set(spec.agentId, { url, close: () => app.close() });
    return { ...deployed, url };
  };
  driver.status = async (agentId) => {
    const s = await status(agentId);
    const r = runtimes.get(agentId);
    return r && s.status !== 'not_found' ? { ...s, url: r.url } : s;
  };
  t = await startAgentsPlatform({
    env: { ROUTER_API_KEY: ROUTER_KEY, ROUTER_BASE_URL: router.url, AGENT_GATEWAY_RATE_LIMIT: '1000', ...env },
    driver,
  });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  const webUrl = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
  const platform = t;

  return {
    t: platform,
    router,
    webUrl,
    async owner(count) {
      const user = await subscriber(platform, 'network');
      const agentIds: string[] = [];
      for (let i = 0; i < count; i++) {
        const res = await platform.web.inject({
          method: 'POST',
          url: '/api/agents/provision',
          headers: { cookie: user.cookie },
          payload: { name: `Agent ${i + 1}`, model: 'openai/gpt-4o-mini' },
        });
        expect(res.statusCode, res.body).toBe(201);
        agentIds.push(res.json().agent.id as string);
      }
      for (const agentId of agentIds)
        await eventually(async () => {
          const a = (await platform.web.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { cookie: user.cookie } })).json()
            .agent;
          return a?.status === 'running' && runtimes.has(agentId);
        }, 15_000);
      return { id: user.id, cookie: user.cookie, agentIds };
    },
    async close() {
      await platform.close();
      for (const r of runtimes.values()) await r.close();
      await router.close();
    },
  };
}
