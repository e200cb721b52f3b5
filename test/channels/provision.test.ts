/**
 * §4.18 POST /api/agents/provision with channel tokens (docs/channels.md "API"): each token is checked
 * with its provider before any agent exists, becomes a platform channel of the new agent, and is
 * taken out of the configuration the agent gets, so it is in neither the agent's configuration nor
 * its environment. With the OpenClaw runtime the same channel becomes OpenClaw's own
 * `channels.telegram` configuration instead (docs/channels.md "OpenClaw").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClawChannel } from '../../src/domains/channels/channel-messages.rules.ts';
import { type AgentsTestPlatform, eventually, startAgentsPlatform, subscriber } from '../agents/helpers.ts';
import { type FakeTelegramApi, startFakeTelegramApi } from '../fakes/telegram-api.ts';

let telegram: FakeTelegramApi;
let builtin: AgentsTestPlatform;
let openclaw: AgentsTestPlatform;
let n = 0;

function newBot() {
  n++;
  const token = `${8100000 + n}:AAF${'p'.repeat(24)}prov${n}`;
  telegram.addBot(token, { id: 8100000 + n, username: `prov_${n}_bot` });
  return token;
}

async function provision(t: AgentsTestPlatform, channels: Record<string, unknown>) {
  const u = await subscriber(t, 'collective');
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/agents/provision',
    headers: { cookie: u.cookie },
    payload: { name: `chan-${n}`, model: 'claude-opus-4-6', config: { channels } },
  });
  return { u, res };
}

beforeAll(async () => {
  telegram = await startFakeTelegramApi();
  builtin = await startAgentsPlatform({ env: { TELEGRAM_API_URL: telegram.apiUrl } });
  await builtin.platform.startChannels({ servesWeb: false });
  openclaw = await startAgentsPlatform({ env: { TELEGRAM_API_URL: telegram.apiUrl, AGENT_RUNTIME: 'openclaw' } });
});
afterAll(async () => {
  await builtin?.close();
  await openclaw?.close();
  await telegram?.close();
});

describe('POST /api/agents/provision with channel tokens (§4.18)', () => {
  it('the token becomes a platform channel of the agent and never reaches the agent (configuration or environment)', async () => {
    const token = newBot();
    const { u, res } = await provision(builtin, { telegram: { botToken: token, allowFrom: ['@Owner'] }, webchat: { enabled: true } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.body).not.toContain(token);
    const agentId = res.json().agent.id as string;
    const listed = await eventually(async () => {
      const l = (await builtin.web.inject({ method: 'GET', url: `/api/agents/${agentId}/channels`, headers: { cookie: u.cookie } })).json();
      return l.channels[0]?.status === 'connected' ? l : null;
    });
    expect(listed.channels[0]).toMatchObject({ kind: 'telegram', allowFrom: ['@owner'], tokenHint: `••••${token.slice(-4)}` });
    expect(JSON.stringify(listed)).not.toContain(token);
    const deploy = await eventually(async () => builtin.driver.deploys.find((d) => d.agentId === agentId));
    expect(JSON.stringify(deploy.config)).not.toContain(token);
    expect(JSON.stringify(deploy.env ?? {})).not.toContain(token);
    expect(deploy.config.channels).toMatchObject({ telegram: { allowFrom: ['@Owner'] }, webchat: { enabled: true } });
    // nor the agent's stored configuration, nor what the owner reads back
    const stored = await builtin.database.db.kysely
      .selectFrom('agents')
      .select('config')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(stored.config)).not.toContain('botToken');
  });

  it('a token saved in the configuration later (PUT /api/agents/:id/config) becomes or replaces the channel the same way', async () => {
    const { u, res } = await provision(builtin, { webchat: { enabled: true } });
    expect(res.statusCode).toBe(201);
    const agentId = res.json().agent.id as string;
    const first = newBot();
    const put = (token: string) =>
      builtin.web.inject({
        method: 'PUT',
        url: `/api/agents/${agentId}/config`,
        headers: { cookie: u.cookie },
        payload: { channels: { telegram: { botToken: token, allowFrom: ['9'] } } },
      });
    expect((await put(first)).statusCode).toBe(200);
    const channel = async () =>
      (await builtin.web.inject({ method: 'GET', url: `/api/agents/${agentId}/channels`, headers: { cookie: u.cookie } })).json().channels;
    expect(await channel()).toMatchObject([{ kind: 'telegram', tokenHint: `••••${first.slice(-4)}`, allowFrom: ['9'] }]);
    const second = newBot();
    expect((await put(second)).statusCode).toBe(200);
    expect(await channel()).toMatchObject([{ kind: 'telegram', tokenHint: `••••${second.slice(-4)}` }]);
    const stored = await builtin.database.db.kysely
      .selectFrom('agents')
      .select('config')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(stored.config)).not.toContain('botToken');
    expect((await put('555:a-token-telegram-refuses-here')).statusCode).toBe(400);
  });

  it('a token the provider refuses is 400 CHANNEL_TOKEN_REFUSED and no agent is made', async () => {
    const { u, res } = await provision(builtin, { telegram: { botToken: '123:refused-token-nobody-knows' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CHANNEL_TOKEN_REFUSED' });
    const agents = await builtin.web.inject({ method: 'GET', url: '/api/agents/provision', headers: { cookie: u.cookie } });
    expect(agents.json().count).toBe(0);
  });

  it("with the OpenClaw runtime the channel becomes OpenClaw's own channels.telegram, and the platform runs no bot for it", async () => {
    const token = newBot();
    const { res } = await provision(openclaw, { telegram: { botToken: token } });
    expect(res.statusCode, res.body).toBe(201);
    const agentId = res.json().agent.id as string;
    const deploy = await eventually(async () => openclaw.driver.deploys.find((d) => d.agentId === agentId));
    expect(deploy.config.channels).toMatchObject({ telegram: { enabled: true, botToken: token, dmPolicy: 'open', allowFrom: ['*'] } });
    expect(telegram.callsOf(token, 'getUpdates')).toEqual([]);
  });
});

describe("OpenClaw's channel keys", () => {
  it('an empty allow list is open to everyone (§2), a list is pairing; Discord takes `token`', () => {
    expect(openClawChannel({ kind: 'telegram', token: 't', allowFrom: [], enabled: true })).toEqual({
      enabled: true,
      botToken: 't',
      dmPolicy: 'open',
      allowFrom: ['*'],
    });
    expect(openClawChannel({ kind: 'discord', token: 'd', allowFrom: ['42'], enabled: false })).toEqual({
      enabled: false,
      token: 'd',
      dmPolicy: 'pairing',
      allowFrom: ['42'],
    });
  });
});

describe('§4.18 POST /api/provision: the same provisioning with `channels` beside the body', () => {
  it('each token becomes a platform channel (the agent never gets it); a refused one is 400 and makes no agent', async () => {
    const u = await subscriber(builtin, 'collective');
    const send = (payload: Record<string, unknown>) =>
      builtin.web.inject({ method: 'POST', url: '/api/provision', headers: { cookie: u.cookie }, payload });
    const refused = await send({ name: 'refused', channels: { telegram: { botToken: '1:not-a-token-telegram-knows' } } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'CHANNEL_TOKEN_REFUSED' });
    expect((await builtin.web.inject({ method: 'GET', url: '/api/agents', headers: { cookie: u.cookie } })).json().agents).toEqual([]);
    expect((await send({ name: 'bad', channels: { telegram: { token: 'x' } } })).statusCode).toBe(400);

    const token = newBot();
    const res = await send({ name: 'with-telegram', channels: { telegram: { botToken: token, allowFrom: ['@Owner'] } } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.body).not.toContain(token);
    const agentId = res.json().agent.id as string;
    const listed = await eventually(async () => {
      const l = (await builtin.web.inject({ method: 'GET', url: `/api/agents/${agentId}/channels`, headers: { cookie: u.cookie } })).json();
      return l.channels[0]?.status === 'connected' ? l : null;
    });
    expect(listed.channels[0]).toMatchObject({ kind: 'telegram', allowFrom: ['@owner'] });
    const deploy = await eventually(async () => builtin.driver.deploys.find((d) => d.agentId === agentId));
    expect(JSON.stringify(deploy.config)).not.toContain(token);
    expect(JSON.stringify(deploy.env ?? {})).not.toContain(token);
  });
});
