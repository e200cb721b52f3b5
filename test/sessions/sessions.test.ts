/**
 * Sessions that do not mix (docs/channels.md "Sessions"; §2 session.dmScope, session.resetTriggers;
 * §8 session tokens: 100,000 per session, compaction automatic at 80%). The dashboard's chat is a
 * session the platform keeps: it sends the agent the session's history; a call through the agent's
 * OpenAI-compatible endpoint is stateless and never shows in the dashboard's transcript nor in a
 * later dashboard chat's history, while the agent's messages still list it, labelled `api`. The
 * agent's gateway is the OpenAI-compatible fake, so its recorded requests are what the agent got.
 */
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { chatRequests, GATEWAY_TOKEN, type Owner, ownerWithAgent } from './helpers.ts';

let t: TestPlatform;
let agent: FakeOpenAi;
let webUrl: string;

type Message = { sender: string; content: string; platform: string; session: string | null };

const chat = async (o: Owner, message: string) => {
  const res = await t.web.inject({
    method: 'POST',
    url: '/api/chat',
    headers: { cookie: o.cookie },
    payload: { agentId: o.agentId, message },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().reply as string;
};
const messages = async (o: Owner, session?: string): Promise<Message[]> => {
  const q = session ? `&session=${session}` : '';
  const res = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/messages?limit=100${q}`, headers: { cookie: o.cookie } });
  expect(res.statusCode).toBe(200);
  return (res.json().messages as Message[]).reverse();
};

beforeAll(async () => {
  agent = await startFakeOpenAi({ apiKey: GATEWAY_TOKEN });
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '100000' });
  await t.web.listen({ host: '127.0.0.1', port: 0 });
  webUrl = `http://127.0.0.1:${(t.web.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
  await agent?.close();
});
beforeEach(() => agent.reset());

describe('the dashboard session', () => {
  it('the platform sends the agent the session history with each message', async () => {
    const o = await ownerWithAgent(t, agent);
    expect(await chat(o, 'my name is Ada')).toBe('Echo: my name is Ada');
    await chat(o, 'what is my name?');
    expect(chatRequests(agent).at(-1)).toEqual(['user: my name is Ada', 'assistant: Echo: my name is Ada', 'user: what is my name?']);
    const stored = await messages(o, 'dashboard');
    expect(stored.map((m) => [m.platform, m.session])).toEqual(Array(4).fill(['dashboard', 'dashboard']));
  });

  it('an SDK call through the agent endpoint is never in the dashboard transcript nor in a later dashboard chat', async () => {
    const o = await ownerWithAgent(t, agent);
    const key = (await t.web.inject({ method: 'POST', url: '/api/keys', headers: { cookie: o.cookie }, payload: { name: 'sdk' } })).json()
      .key;
    await chat(o, 'dashboard question');
    const sdk = new OpenAI({ apiKey: key, baseURL: `${webUrl}/api/agents/${o.agentId}/v1`, maxRetries: 0 });
    const stream = await sdk.chat.completions.create({
      model: 'default',
      stream: true,
      messages: [{ role: 'user', content: 'sdk secret plan' }],
    });
    for await (const _ of stream) {
      // read to the end: the proxy stores the streamed turn once it is complete
    }
    // the agent's messages list every call, labelled by source
    const all = await eventually(async () => {
      const rows = await messages(o);
      return rows.length === 4 ? rows : null;
    });
    expect(all.map((m) => [m.platform, m.content])).toContainEqual(['api', 'sdk secret plan']);
    expect(all.find((m) => m.content === 'sdk secret plan')!.session).toBeNull();
    // the dashboard's transcript is its session only
    expect((await messages(o, 'dashboard')).map((m) => m.content)).toEqual(['dashboard question', 'Echo: dashboard question']);
    agent.reset();
    await chat(o, 'and now?');
    const sent = chatRequests(agent).at(-1)!;
    expect(sent.join('\n')).not.toContain('sdk secret plan');
    expect(sent).toEqual(['user: dashboard question', 'assistant: Echo: dashboard question', 'user: and now?']);
  });

  it('a reset word starts the session over without calling the agent; the configured session.resetTriggers replace the defaults (§2)', async () => {
    const o = await ownerWithAgent(t, agent);
    await chat(o, 'remember 42');
    agent.reset();
    expect(await chat(o, '/new')).toMatch(/new session/i);
    expect(chatRequests(agent)).toEqual([]);
    await chat(o, 'what number?');
    expect(chatRequests(agent).at(-1)).toEqual(['user: what number?']);

    const custom = await ownerWithAgent(t, agent, { session: { resetTriggers: ['/fresh'] } });
    await chat(custom, 'one');
    agent.reset();
    await chat(custom, '/reset'); // not a reset word for this agent: sent like any message
    expect(chatRequests(agent).at(-1)).toEqual(['user: one', 'assistant: Echo: one', 'user: /reset']);
    expect(await chat(custom, '/FRESH')).toMatch(/new session/i);
    agent.reset();
    await chat(custom, 'two');
    expect(chatRequests(agent).at(-1)).toEqual(['user: two']);
  });

  it("POST /api/chat/reset starts the dashboard session over (the dashboard's New conversation); another user's agent is 404", async () => {
    const o = await ownerWithAgent(t, agent);
    await chat(o, 'old topic');
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/chat/reset',
      headers: { cookie: o.cookie },
      payload: { agentId: o.agentId },
    });
    expect(res.statusCode).toBe(200);
    agent.reset();
    await chat(o, 'new topic');
    expect(chatRequests(agent).at(-1)).toEqual(['user: new topic']);
    // the owner still reads the whole transcript
    expect((await messages(o, 'dashboard')).map((m) => m.content)).toEqual([
      'old topic',
      'Echo: old topic',
      'new topic',
      'Echo: new topic',
    ]);
    const other = await ownerWithAgent(t, agent);
    const theirs = await t.web.inject({
      method: 'POST',
      url: '/api/chat/reset',
      headers: { cookie: other.cookie },
      payload: { agentId: o.agentId },
    });
    expect(theirs.statusCode).toBe(404);
  });

  it('a messages conversation is stateless: sent as it is, stored as api, part of no session', async () => {
    const o = await ownerWithAgent(t, agent);
    await chat(o, 'in the session');
    agent.reset();
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/chat',
      headers: { cookie: o.cookie },
      payload: { agentId: o.agentId, messages: [{ role: 'user', content: 'standalone' }] },
    });
    expect(res.statusCode).toBe(200);
    expect(chatRequests(agent).at(-1)).toEqual(['user: standalone']);
    expect((await messages(o, 'dashboard')).map((m) => m.content)).not.toContain('standalone');
    expect((await messages(o)).find((m) => m.content === 'standalone')).toMatchObject({ platform: 'api', session: null });
  });
});

describe('§8 session tokens: compaction at 80% of 100,000', () => {
  it('a session past 80,000 tokens (~4 characters a token) is compacted into a summary the model writes, and still answers', async () => {
    const o = await ownerWithAgent(t, agent);
    // each turn: 30,000 characters asked and echoed back, ~15,000 tokens
    const big = (i: number) => `turn ${i} `.padEnd(30_000, 'x');
    for (let i = 0; i < 5; i++) await chat(o, big(i));
    const before = chatRequests(agent).length;
    // no compaction yet: 4 turns of history (~60,000 tokens) and the question
    expect(chatRequests(agent).at(-1)!.length).toBe(9);
    // 5 turns stored (~75,000 tokens) and this message: past 80%
    const reply = await chat(o, big(5));
    expect(reply.startsWith('Echo: turn 5 ')).toBe(true);
    const [summaryCall, answerCall] = chatRequests(agent).slice(before);
    const startsWith = (line: string | undefined, prefix: string) => line?.slice(0, prefix.length) ?? '';
    // the summary request: the model is asked to summarise the oldest turns
    expect(startsWith(summaryCall![0], 'system: You are compacting')).toBe('system: You are compacting');
    expect(startsWith(summaryCall!.at(-1), 'user: Summarise the conversation above')).toBe('user: Summarise the conversation above');
    expect(summaryCall!.some((m) => m.startsWith('user: turn 0 '))).toBe(true);
    // the answer: the summary in place of the oldest turns, within the limit
    expect(startsWith(answerCall![0], 'system: Summary of the earlier part')).toBe('system: Summary of the earlier part');
    expect(answerCall!.some((m) => m.includes('turn 0 '))).toBe(false);
    expect(answerCall!.join('').length / 4).toBeLessThan(80_000);
    expect(startsWith(answerCall!.at(-1), 'user: turn 5 ')).toBe('user: turn 5 ');
    // the owner still reads every turn
    expect((await messages(o, 'dashboard')).length).toBe(12);
    // and it keeps going
    agent.reset();
    expect(await chat(o, 'and again?')).toBe('Echo: and again?');
    expect(chatRequests(agent)).toHaveLength(1);
    expect(chatRequests(agent)[0]![0]).toMatch(/^system: Summary of the earlier part/);
  });
});
