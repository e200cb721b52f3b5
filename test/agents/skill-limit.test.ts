/**
 * §2 Plans, skill limit (solo 3, collective 10, label 25, network 100), where skills exist: an
 * OpenClaw agent's configuration (docs/agents.md "OpenClaw", "Skills"). A configuration that asks
 * for more skills than the agent's plan allows is refused with a sentence when it is saved (PUT
 * /api/agents/:id/config, and at provisioning), and nothing is stored. What the platform then
 * writes for OpenClaw is test/drivers/openclaw-config.test.ts's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, startAgentsPlatform, subscriber } from './helpers.ts';

let t: AgentsTestPlatform;
beforeAll(async () => {
  t = await startAgentsPlatform();
});
afterAll(() => t.close());

const web = (method: 'GET' | 'POST' | 'PUT', url: string, cookie: string, payload?: object) =>
  t.web.inject({ method, url, headers: { cookie }, ...(payload ? { payload } : {}) });
const names = (n: number) => Array.from({ length: n }, (_, i) => `skill-${i + 1}`);
const storedConfig = async (id: string) =>
  (await t.database.db.kysely.selectFrom('agents').select('config').where('id', '=', id).executeTakeFirstOrThrow()).config;

async function agentOf(plan: 'solo' | 'collective') {
  const u = await subscriber(t, plan);
  const res = await web('POST', '/api/agents/provision', u.cookie, { name: `${plan} agent` });
  expect(res.statusCode).toBe(201);
  return { cookie: u.cookie, id: res.json().agent.id as string };
}

describe('skill limit per plan (§2)', () => {
  it('solo: a configuration naming more than 3 skills is refused with a sentence and not stored, also across agent entries; 3 are stored', async () => {
    const { cookie, id } = await agentOf('solo');
    for (const config of [
      { agents: { defaults: { skills: names(4) } } },
      { agents: { defaults: { skills: names(2) }, entries: { main: { default: true, skills: ['skill-3', 'skill-4'] } } } },
    ]) {
      const res = await web('PUT', `/api/agents/${id}/config`, cookie, config);
      expect(res.statusCode, JSON.stringify(config)).toBe(400);
      expect(res.json().error).toBe(
        'The configuration names 4 skills (agents.defaults.skills and agents.entries.*.skills together), but the solo plan ' +
          'allows at most 3 skills per agent (§2 Plans): name at most 3, or move the agent to a larger plan',
      );
      expect(JSON.stringify(await storedConfig(id))).not.toContain('skill-');
    }

    // within the limit: stored (a name given twice counts once)
    const ok = await web('PUT', `/api/agents/${id}/config`, cookie, {
      agents: { defaults: { skills: [...names(3), 'skill-1'] }, entries: { main: { skills: ['skill-2'] } } },
    });
    expect(ok.statusCode).toBe(200);
    expect(await storedConfig(id)).toMatchObject({ agents: { defaults: { skills: [...names(3), 'skill-1'] } } });
  });

  it('collective: 10 skills are fine, 11 are not', async () => {
    const { cookie, id } = await agentOf('collective');
    expect((await web('PUT', `/api/agents/${id}/config`, cookie, { agents: { defaults: { skills: names(10) } } })).statusCode).toBe(200);
    const over = await web('PUT', `/api/agents/${id}/config`, cookie, { agents: { defaults: { skills: names(11) } } });
    expect(over.statusCode).toBe(400);
    expect(over.json().error).toMatch(/names 11 skills .*, but the collective plan allows at most 10 skills per agent/);
  });

  it('provisioning with more skills than the plan allows is refused and creates nothing', async () => {
    const u = await subscriber(t, 'solo');
    const res = await web('POST', '/api/agents/provision', u.cookie, {
      name: 'Skilled',
      config: { agents: { defaults: { skills: names(4) } } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/the solo plan allows at most 3 skills/);
    expect((await web('GET', '/api/agents', u.cookie)).json().agents).toEqual([]);
  });
});
