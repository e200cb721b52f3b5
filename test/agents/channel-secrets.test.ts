/**
 * Channel secrets in an agent's configuration (docs/security.md "Secrets at rest"): sealed in
 * PostgreSQL, masked in every answer (web and backend), kept when a masked configuration is sent
 * back, and given in clear only to the agent itself (the hosting driver's deploy spec). The channels
 * the platform runs itself (Telegram, Discord) keep their tokens out of the agent altogether
 * (test/channels/provision.test.ts); this is every other channel's secret, here a Slack bot's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, bearer, eventually, startAgentsPlatform, subscriber } from './helpers.ts';

const TOKEN = 'xoxb-123456789-slack-bot-token-secret-9xyz';
const NEW_TOKEN = 'xoxb-987654321-another-slack-token-4abc';

let t: AgentsTestPlatform;
beforeAll(async () => {
  t = await startAgentsPlatform();
});
afterAll(() => t.close());

const web = (method: 'GET' | 'POST' | 'PUT', url: string, cookie: string, payload?: object) =>
  t.web.inject({ method, url, headers: { cookie }, ...(payload ? { payload } : {}) });
const storedConfig = async (id: string) =>
  JSON.stringify((await t.database.db.kysely.selectFrom('agents').select('config').where('id', '=', id).executeTakeFirstOrThrow()).config);

describe('channel secrets', () => {
  it('are sealed at rest, masked in answers, kept through a masked round trip, and clear only in the deploy spec', async () => {
    const u = await subscriber(t);
    const prov = await web('POST', '/api/agents/provision', u.cookie, {
      name: 'Bot',
      config: { channels: { slack: { enabled: true, botToken: TOKEN } } },
    });
    expect(prov.statusCode).toBe(201);
    const id = prov.json().agent.id as string;
    await eventually(async () => (await web('GET', `/api/agents/${id}`, u.cookie)).json().agent?.status === 'running');

    // at rest: sealed, never in clear
    const atRest = await storedConfig(id);
    expect(atRest).not.toContain(TOKEN);
    expect(atRest).toContain('$sealed');

    // the agent got it in clear
    expect(t.driver.deploys.at(-1)!.config).toMatchObject({ channels: { slack: { enabled: true, botToken: TOKEN } } });

    // answers: masked (web config, backend agent)
    const got = (await web('GET', `/api/agents/${id}/config`, u.cookie)).json();
    expect(got.config.channels.slack).toEqual({ enabled: true, botToken: '••••9xyz' });
    const backend = await t.backend.inject({ method: 'GET', url: `/api/agents/${id}`, headers: { ...bearer(t), 'x-user-id': u.id } });
    expect(backend.body).not.toContain(TOKEN);

    // a masked configuration sent back keeps the secret; a new value replaces it
    const kept = await web('PUT', `/api/agents/${id}/config`, u.cookie, {
      channels: { slack: { enabled: false, botToken: '••••9xyz' } },
    });
    expect(kept.statusCode).toBe(200);
    expect(kept.json().config.channels.slack).toEqual({ enabled: false, botToken: '••••9xyz' });
    expect(await storedConfig(id)).not.toContain(TOKEN);
    const replaced = await web('PUT', `/api/agents/${id}/config`, u.cookie, {
      channels: { slack: { enabled: true, botToken: NEW_TOKEN } },
    });
    expect(replaced.json().config.channels.slack.botToken).toBe('••••4abc');
    expect(await storedConfig(id)).not.toContain(NEW_TOKEN);

    // a client cannot plant a sealed blob of its own
    const planted = await web('PUT', `/api/agents/${id}/config`, u.cookie, { channels: { discord: { token: { $sealed: 'v1.x.y.z' } } } });
    expect(planted.statusCode).toBe(200);
    expect(await storedConfig(id)).not.toContain('v1.x.y.z');
  });
});
