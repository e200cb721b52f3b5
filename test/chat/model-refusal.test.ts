/**
 * A refusal of the agent's model call reaches the chat caller with its own status
 * (docs/agents.md "Talk to your agent"): §4.8 POST /api/gateway/chat and §4.18 POST /api/chat
 * answer as the agent's own route does (403 `MODEL_RESTRICTED` with `allowedModels`, 429 for a
 * used-up budget), not 500 `AGENT_ERROR` or 502 `AGENT_UNAVAILABLE`; an agent that cannot be
 * reached stays a 5xx (502 on REST chat, 500 on the gateway chat as §4.8 says), with one log line saying why.
 *
 * First found when a solo user's default agent was given `claude-opus-4-6`, a model the solo plan
 * does not include. Provisioning now chooses a model the plan allows (docs/agents.md "Model"), so
 * the case that remains is an owner whose plan shrank after provisioning: a network subscriber's
 * Claude Opus agent, the owner then moved to solo. The agent is the built-in runtime (what the local
 * driver runs), started by the test's hosting driver with the deploy's own credentials; its model
 * is the platform's AI gateway in front of the local fake provider.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_GATEWAY_PATH } from '../../src/config/env.ts';
import { loggerOptions } from '../../src/http/shared/logging.ts';
import { createGateway } from '../../src/runtime/gateway.ts';
import { createFakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROUTER_KEY = 'router-secret-key-of-the-operator';
const RESTRICTED = 'This model is not available on your plan';

let t: AgentsTestPlatform;
let router: FakeOpenAi;
/** the built-in runtimes the driver started, by agent id */
const runtimes = new Map<string, { url: string; close: () => Promise<unknown>; cut: () => void }>();
/** the web app's log lines */
const logLines: Record<string, unknown>[] = [];

/** A hosting driver that runs each agent as the built-in runtime, on a loopback port, as the local driver does. */
function runtimeDriver() {
  const driver = createFakeDriver();
  const deploy = driver.deploy;
  const status = driver.status;
  driver.deploy = async (spec) => {
    const deployed = await deploy(spec);
    const { app } = await createGateway({
      gatewayToken: spec.gatewayToken,
      agentId: spec.agentId,
      // the deploy's model and key; the gateway at the address this test's backend listens on
      model: {
        baseUrl: `${t.backendUrl}${MODEL_GATEWAY_PATH}`,
        apiKey: spec.env!.AGENT_MODEL_API_KEY!,
        defaultModel: spec.env!.AGENT_MODEL!,
        timeoutMs: 5_000,
      },
      logger: pino({ level: 'silent' }),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    runtimes.set(spec.agentId, { url, close: () => app.close(), cut: () => app.server.closeAllConnections() });
    return { ...deployed, url };
  };
  driver.status = async (agentId) => {
    const s = await status(agentId);
    const r = runtimes.get(agentId);
    return r && s.status !== 'not_found' ? { ...s, url: r.url } : s;
  };
  return driver;
}

/**
 * A solo subscriber's agent, running, on `model` (default: what §4.7's default maps to). With
 * `outgrown`, the agent was provisioned on the network plan with Claude Opus and its owner then
 * moved to solo, which does not include that model.
 */
async function soloAgent(model?: string, outgrown = false) {
  const user = await subscriber(t, outgrown ? 'network' : 'solo');
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/agents/provision',
    headers: { cookie: user.cookie },
    payload: { name: 'Default', ...(model ? { model } : {}) },
  });
  expect(res.statusCode, res.body).toBe(201);
  const agentId = res.json().agent.id as string;
  await eventually(async () => {
    const a = (await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { cookie: user.cookie } })).json().agent;
    return a?.status === 'running' && runtimes.has(agentId);
  }, 15_000);
  const spec = t.driver.deploys.findLast((s) => s.agentId === agentId)!;
  if (outgrown) await t.database.db.kysely.updateTable('users').set({ plan: 'solo' }).where('id', '=', user.id).execute();
  return { ...user, agentId, spec };
}
const outgrownAgent = () => soloAgent('anthropic/claude-opus-4.1', true);

const post = (cookie: string, url: string, payload: unknown, headers: Record<string, string> = {}) =>
  t.web.inject({ method: 'POST', url, headers: { cookie, ...headers }, payload: payload as object });

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: ROUTER_KEY });
  // the list the fuzzing run's fake router answered: the provisioning default among its models
  router.models = [
    { id: 'claude-opus-4-6', name: 'Claude Opus 4.6', pricing: { prompt: '0.000015', completion: '0.000075' }, context_length: 200_000 },
  ];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) logLines.push(JSON.parse(line));
      done();
    },
  });
  t = await startAgentsPlatform({
    env: { ROUTER_API_KEY: ROUTER_KEY, ROUTER_BASE_URL: router.url, AGENT_GATEWAY_RATE_LIMIT: '1000', LOG_LEVEL: 'info' },
    driver: runtimeDriver(),
    // the lines the apps write, with the options they use for their own logger
    logger: pino(loggerOptions('info', 'json'), sink),
  });
  const refreshed = await t.backend.inject({ method: 'GET', url: '/api/ai/models?refresh=true', headers: bearer(t) });
  expect(refreshed.statusCode).toBe(200);
  expect(refreshed.json().models.map((m: { id: string }) => m.id)).toContain('claude-opus-4-6');
});
afterAll(async () => {
  await t?.close();
  for (const r of runtimes.values()) await r.close();
  await router?.close();
});

describe("a model the plan does not include: the agent's 403, not a 5xx", () => {
  it('a solo default agent runs a model its plan includes; an outgrown one is refused by its own route (the cause)', async () => {
    const fine = await soloAgent();
    const ok = await post(fine.cookie, `/api/agents/${fine.agentId}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.statusCode, ok.body).toBe(200);
    const o = await outgrownAgent();
    // the runtime asks for `default`, which the gateway reads as the agent's stored model at each call
    expect(o.spec.env?.AGENT_MODEL).toBe('default');
    const own = await post(o.cookie, `/api/agents/${o.agentId}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    expect(own.statusCode).toBe(403);
    expect(own.json().error).toMatchObject({ message: RESTRICTED, code: 'model_restricted' });
  });

  it('§4.8 POST /api/gateway/chat: 403 MODEL_RESTRICTED with the sentence and allowedModels', async () => {
    const o = await outgrownAgent();
    router.reset();
    const res = await post(o.cookie, '/api/gateway/chat', { message: 'hi' });
    expect(res.statusCode, res.body).toBe(403);
    const body = res.json();
    expect(body).toMatchObject({ error: RESTRICTED, code: 'MODEL_RESTRICTED' });
    expect(body.allowedModels).toBeInstanceOf(Array);
    expect(body.allowedModels).not.toContain('anthropic/claude-opus-4.1');
    expect(router.requests.filter((r) => r.path === '/v1/chat/completions')).toEqual([]);
  });

  it('§4.18 POST /api/chat: 403 MODEL_RESTRICTED, as JSON and when a stream was asked for (before any event)', async () => {
    const o = await outgrownAgent();
    const json = await post(o.cookie, '/api/chat', { message: 'hi' });
    expect(json.statusCode, json.body).toBe(403);
    expect(json.json()).toMatchObject({ error: RESTRICTED, code: 'MODEL_RESTRICTED', allowedModels: expect.any(Array) });
    const streamed = await post(o.cookie, '/api/chat', { message: 'hi' }, { accept: 'text/event-stream' });
    expect(streamed.statusCode, streamed.body).toBe(403);
    expect(streamed.headers['content-type']).toContain('application/json');
    expect(streamed.json()).toMatchObject({ error: RESTRICTED, code: 'MODEL_RESTRICTED' });
    // nothing was said, so nothing is stored
    const history = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/messages`, headers: { cookie: o.cookie } });
    expect(history.json().messages).toEqual([]);
  });
});

describe("a used-up budget: the agent's 429 with the sentence", () => {
  it('both chats answer 429 AGENT_BUDGET_EXCEEDED with the gateway’s sentence', async () => {
    // a model the solo plan includes, so the budget is what refuses
    const o = await soloAgent('openai/gpt-4o-mini');
    const budget = await t.web.inject({
      method: 'PUT',
      url: `/api/agents/${o.agentId}/budget`,
      headers: { cookie: o.cookie },
      payload: { monthlyBudgetUsd: 0.000001 },
    });
    expect(budget.statusCode).toBe(200);
    // spend past it once through the agent's own route (the gateway checks before each call)
    await post(o.cookie, `/api/agents/${o.agentId}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] });
    await t.platform.services.ai.usage.flush();
    const gateway = await post(o.cookie, '/api/gateway/chat', { message: 'hi' });
    const rest = await post(o.cookie, '/api/chat', { message: 'hi' });
    for (const res of [gateway, rest]) {
      expect(res.statusCode, res.body).toBe(429);
      expect(res.json().code).toBe('AGENT_BUDGET_EXCEEDED');
      expect(res.json().error).toContain("This agent's monthly budget of $0.000001 is used up");
    }
  });
});

describe('an agent that cannot be reached is a 5xx with one log line saying why', () => {
  it('a stream that breaks off after the first text: an `error` event, and one log line (the error handler never sees it)', async () => {
    const o = await outgrownAgent();
    const allowed = (await post(o.cookie, '/api/chat', { message: 'hi' })).json().allowedModels as string[];
    router.holdStreams = true;
    try {
      const before = logLines.length;
      const answer = post(o.cookie, '/api/chat', { message: 'hi', model: allowed[0] }, { accept: 'text/event-stream' });
      await eventually(async () => router.requests.some((r) => r.body?.stream === true && r.body.model === allowed[0]));
      await new Promise((r) => setTimeout(r, 100));
      runtimes.get(o.agentId)!.cut();
      const res = await answer;
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('event: delta');
      expect(res.body).toContain(
        'event: error\ndata: {"error":"The agent did not answer: the stream broke off","code":"AGENT_UNAVAILABLE"}',
      );
      const failed = logLines.slice(before).filter((l) => (l.level as number) >= 50);
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ msg: 'chat stream failed', agentId: o.agentId, err: { id: 'AGENT_UNAVAILABLE' } });
    } finally {
      router.holdStreams = false;
    }
  });

  it('REST chat 502 AGENT_UNAVAILABLE, the gateway chat 500 AGENT_ERROR (§4.8 gives it 500), each logged with its reason', async () => {
    const o = await soloAgent();
    await runtimes.get(o.agentId)!.close();
    for (const [url, status, code] of [
      ['/api/gateway/chat', 500, 'AGENT_ERROR'],
      ['/api/chat', 502, 'AGENT_UNAVAILABLE'],
    ] as const) {
      const before = logLines.length;
      const res = await post(o.cookie, url, { message: 'hi' });
      expect(res.statusCode, `${url} ${res.body}`).toBe(status);
      expect(res.json().code).toBe(code);
      const failed = logLines.slice(before).filter((l) => (l.level as number) >= 50);
      expect(failed, url).toHaveLength(1);
      expect(failed[0]!.err).toMatchObject({ id: code, message: expect.stringMatching(/reach/) });
    }
  });
});
