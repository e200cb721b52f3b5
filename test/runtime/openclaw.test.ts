/**
 * AGENT_RUNTIME=openclaw in `npm test`, without OpenClaw installed (the real one, ~10 s and ~1 GB per
 * agent, is `npm run test:openclaw`, test/openclaw/; CI runs it as its own pass):
 *
 * - the local driver says clearly that OpenClaw is not installed, and makes no start attempt; a
 *   deleted agent's folder left half-removed by a previous process goes at the next start;
 * - OpenClaw's OpenAI-compatible endpoint takes an agent target as `model` (`openclaw`,
 *   `openclaw/default`, `openclaw/<agentId>`; anything else is its 400 "Invalid `model`. Use
 *   `openclaw` or `openclaw/<agentId>`": OpenClaw's docs/gateway/openai-http-api.md "Agent-first
 *   model contract"). Through the platform's agent proxy the Connect snippet's `model: "default"`,
 *   the model `GET …/v1/models` lists and the agent's provisioned model reach it as
 *   `openclaw/default`, streamed and not, and so does the dashboard chat (§4.18 `POST /api/chat`);
 *   before, they reached it as the agent's provider model and got that 400. The agent here is a
 *   stand-in gateway holding OpenClaw's contract (model names, bearer token, its SSE shape),
 *   started by the test's hosting driver with the deploy's own token.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { BadRequestError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostingUnavailableError } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import { createFakeDriver } from '../agents/fake-driver.ts';
import { type AgentsTestPlatform, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'openclaw-driver-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const spec = {
  agentId: 'oc1',
  userId: 'u1',
  plan: 'solo',
  gatewayToken: 'o'.repeat(48),
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config: {},
};

describe('local driver with AGENT_RUNTIME=openclaw', () => {
  it('says clearly that OpenClaw is not installed, and how to install it', async () => {
    const driver = createLocalDriver({ dataDir, runtime: 'openclaw', sandbox: testAgentSandbox() });
    await expect(driver.deploy(spec)).rejects.toBeInstanceOf(HostingUnavailableError);
    await expect(driver.deploy(spec)).rejects.toThrow(/npm run runtime:openclaw/);
  });

  it("a deleted agent's folder a previous process had not finished removing is removed at the next start, and is no agent", async () => {
    // a delete renames the folder to .deleted-<id>-<random> and removes its files in the background
    // (an OpenClaw home is thousands of files); a platform that stopped meanwhile left this
    const trash = join(dataDir, 'agents', '.deleted-gone1-0badc0de');
    mkdirSync(join(trash, 'home', '.cache', 'node-compile'), { recursive: true });
    writeFileSync(join(trash, 'home', '.cache', 'node-compile', 'entry'), 'x');
    const driver = createLocalDriver({ dataDir, runtime: 'openclaw', sandbox: testAgentSandbox() });
    expect(await driver.status('gone1')).toEqual({ status: 'not_found' });
    await driver.shutdown();
    expect(existsSync(trash)).toBe(false);
  });
});

/** OpenClaw 2026.9.6's refusal of a `model` that is not one of its agent targets (src/gateway/http-utils.ts). */
const INVALID_MODEL = 'Invalid `model`. Use `openclaw` or `openclaw/<agentId>`.';
const isOpenClawTarget = (m: string) =>
  /^openclaw(\/default)?$/i.test(m) || /^openclaw[:/][a-z0-9][a-z0-9_-]{0,63}$/i.test(m) || /^agent:[a-z0-9][a-z0-9_-]{0,63}$/i.test(m);
const REPLY = 'pong from OpenClaw';

type Seen = { model: unknown; stream: boolean; authorization: string | undefined };
/** The stand-in gateways the driver started, by agent id. */
const gateways = new Map<string, { url: string; server: Server; seen: Seen[] }>();

/** A gateway holding OpenClaw's side of /v1/chat/completions: its bearer token, its model contract, its answers. */
async function openClawGateway(token: string) {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/healthz') return json(200, { ok: true, status: 'live' });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return json(404, { error: { message: 'Not Found' } });
    if (req.headers.authorization !== `Bearer ${token}`) return json(401, { error: { message: 'Unauthorized', type: 'unauthorized' } });
    const body = JSON.parse(raw) as { model?: unknown; stream?: boolean };
    seen.push({ model: body.model, stream: body.stream === true, authorization: req.headers.authorization });
    const model = typeof body.model === 'string' ? body.model : '';
    if (model.trim() && !isOpenClawTarget(model)) return json(400, { error: { message: INVALID_MODEL, type: 'invalid_request_error' } });
    const id = 'chatcmpl_fake';
    const created = Math.floor(Date.now() / 1000);
    if (!body.stream) {
      return json(200, {
        id,
        object: 'chat.completion',
        created,
        model: model || 'openclaw',
        choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
      });
    }
    // OpenClaw's stream: a role chunk without content, content deltas, a finish chunk, [DONE]
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: model || 'openclaw', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
      );
    chunk({ role: 'assistant' });
    for (const piece of REPLY.match(/.{1,5}/g)!) chunk({ content: piece });
    chunk({}, 'stop');
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, seen, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A hosting driver whose agents are stand-in OpenClaw gateways, each with its deploy's gateway token. */
function openClawDriver() {
  const driver = createFakeDriver();
  const { deploy, status } = driver;
  driver.deploy = async (s) => {
    const deployed = await deploy(s);
    const gateway = await openClawGateway(s.gatewayToken);
    gateways.set(s.agentId, gateway);
    return { ...deployed, url: gateway.url };
  };
  driver.status = async (agentId) => {
    const st = await status(agentId);
    const g = gateways.get(agentId);
    return g && st.status !== 'not_found' ? { ...st, url: g.url } : st;
  };
  return driver;
}

describe('OpenClaw model names through the platform (a stand-in gateway with its contract)', () => {
  let t: AgentsTestPlatform;
  let cookie: string;
  let key: string;
  let agentId: string;
  /** the agent's OpenAI-compatible base URL on the platform (the Connect tab's) */
  let baseURL: string;

  beforeAll(async () => {
    t = await startAgentsPlatform({ env: { AGENT_RUNTIME: 'openclaw' }, driver: openClawDriver() });
    await t.web.listen({ host: '127.0.0.1', port: 0 });
    const user = await subscriber(t, 'solo');
    cookie = user.cookie;
    const created = await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie }, payload: { name: 'connect' } });
    key = created.json().key;
    // the §4.7 provisioning model the newcomer kept: not in the catalogue, so the agent runs (and lists) it as `auto`
    const prov = await t.web.inject({
      method: 'POST',
      url: '/api/agents/provision',
      headers: { cookie },
      payload: { name: 'Claw', model: 'gpt-4' },
    });
    expect(prov.statusCode, prov.body).toBe(201);
    agentId = prov.json().agent.id;
    await eventually(async () => {
      const a = (await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}`, headers: { cookie } })).json().agent;
      return a?.status === 'running' && gateways.has(agentId);
    }, 15_000);
    baseURL = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}/api/agents/${agentId}/v1`;
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    for (const g of gateways.values()) await new Promise((r) => g.server.close(r));
  });

  const seen = () => gateways.get(agentId)!.seen;
  const proxied = (body: Record<string, unknown>) =>
    t.web.inject({
      method: 'POST',
      url: `/api/agents/${agentId}/v1/chat/completions`,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: body,
    });

  it('the Connect snippet: model "default" through the openai client reaches OpenClaw as openclaw/default, stream and not', async () => {
    const client = new OpenAI({ apiKey: key, baseURL });
    const before = seen().length;
    const completion = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'hi' }] });
    expect(completion.choices[0]!.message.content).toBe(REPLY);
    const stream = await client.chat.completions.create({ model: 'default', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(REPLY);
    expect(seen().slice(before)).toEqual([
      { model: 'openclaw/default', stream: false, authorization: expect.stringMatching(/^Bearer /) },
      { model: 'openclaw/default', stream: true, authorization: expect.stringMatching(/^Bearer /) },
    ]);
  });

  it('the model GET …/v1/models lists, `default` and none at all are the agent too; OpenClaw targets pass as they are', async () => {
    const listed = (
      await t.web.inject({ method: 'GET', url: `/api/agents/${agentId}/v1/models`, headers: { authorization: `Bearer ${key}` } })
    ).json().data as { id: string }[];
    // the agent's one model (its §4.7 name mapped, docs/agents.md "Model"), then the alias
    expect(listed.map((m) => m.id)).toEqual([expect.stringMatching(/^[a-z-]+\/[\w.-]+$/), 'default']);
    const before = seen().length;
    for (const body of [{ model: listed[0]!.id }, { model: 'default' }, {}, { model: 'openclaw' }, { model: 'openclaw/main' }]) {
      const res = await proxied({ ...body, messages: [{ role: 'user', content: 'hi' }] });
      expect(res.statusCode, `${JSON.stringify(body)}: ${res.body}`).toBe(200);
      expect(res.json().choices[0].message.content).toBe(REPLY);
    }
    expect(
      seen()
        .slice(before)
        .map((s) => s.model),
    ).toEqual(['openclaw/default', 'openclaw/default', 'openclaw/default', 'openclaw', 'openclaw/main']);
  });

  it("a model that is not the agent's reaches OpenClaw as sent, and its 400 says what it accepts", async () => {
    const client = new OpenAI({ apiKey: key, baseURL });
    const err = await client.chat.completions
      .create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).message).toContain(INVALID_MODEL);
    expect(seen().at(-1)!.model).toBe('openai/gpt-4o-mini');
  });

  it('the dashboard chat (§4.18 POST /api/chat), streamed and not, asks OpenClaw for openclaw/default and answers its text', async () => {
    const before = seen().length;
    const plain = await t.web.inject({
      method: 'POST',
      url: '/api/chat',
      headers: { cookie },
      payload: { agentId, messages: [{ role: 'user', content: 'ping' }] },
    });
    expect(plain.statusCode, plain.body).toBe(200);
    expect(plain.json()).toMatchObject({ reply: REPLY, agentId });
    const streamed = await t.web.inject({
      method: 'POST',
      url: '/api/chat',
      headers: { cookie, accept: 'text/event-stream' },
      payload: { agentId, model: 'default', messages: [{ role: 'user', content: 'ping' }] },
    });
    expect(streamed.statusCode).toBe(200);
    expect(streamed.body).toContain('event: delta');
    expect(streamed.body).toContain(`event: done\ndata: {"reply":"${REPLY}"`);
    expect(seen().slice(before)).toEqual([
      { model: 'openclaw/default', stream: true, authorization: expect.any(String) },
      { model: 'openclaw/default', stream: true, authorization: expect.any(String) },
    ]);
  });
});
