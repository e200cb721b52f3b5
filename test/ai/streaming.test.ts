/**
 * Streaming over real sockets: SSE from the backend, fallback before the first byte, Anthropic
 * streams, and a client disconnect mid-stream cancelling the upstream request.
 */
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type FakeAnthropic, startFakeAnthropic } from '../fakes/anthropic-upstream.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

let router: FakeOpenAi;
let anthropic: FakeAnthropic;
let t: TestPlatform;
let base: string;

const headers = {
  authorization: 'Bearer test-internal-key',
  'content-type': 'application/json',
  'x-user-plan': 'network',
  'x-stripe-subscription-id': 'sub_1',
  'x-user-id': 'streamer',
};

beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key' });
  anthropic = await startFakeAnthropic({ apiKey: 'anthropic-key' });
  t = await startTestPlatform({
    ROUTER_API_KEY: 'router-key',
    ROUTER_BASE_URL: router.url,
    ANTHROPIC_API_KEY: 'anthropic-key',
    ANTHROPIC_BASE_URL: anthropic.url,
    AI_RATE_LIMIT: '1000',
  });
  await t.backend.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.backend.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
  await router?.close();
  await anthropic?.close();
});
beforeEach(() => {
  router.reset();
  anthropic.reset();
});

const events = (text: string) =>
  text
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => b.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));

async function streamChat(body: object) {
  const res = await request(`${base}/api/ai/chat`, { method: 'POST', headers, body: JSON.stringify({ stream: true, ...body }) });
  return { status: res.statusCode, type: String(res.headers['content-type']), text: await res.body.text() };
}

describe('POST /api/ai/chat with stream:true', () => {
  it('streams deltas as SSE, then the whole message with usage, then [DONE]; logs usage', async () => {
    const res = await streamChat({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'stream please' }] });
    expect(res.status).toBe(200);
    expect(res.type).toContain('text/event-stream');
    const evs = events(res.text);
    expect(evs.at(-1)).toBe('[DONE]');
    const deltas = evs.filter((e) => e !== '[DONE]' && e.delta !== undefined);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.delta).join('')).toBe('Echo: stream please');
    const done = evs.at(-2);
    expect(done).toMatchObject({
      model: 'openai/gpt-4o-mini',
      provider: 'router',
      done: true,
      message: { role: 'assistant', content: 'Echo: stream please' },
      usage: { total_tokens: 15 },
    });
    const sent = router.requests.at(-1)!.body;
    expect(sent.stream).toBe(true);
    await t.platform.services.ai.usage.flush();
    const rows = await t.database.db.kysely.selectFrom('ai_usage').selectAll().where('user_id', '=', 'streamer').execute();
    expect(rows.length).toBeGreaterThan(0);
  });

  it('falls back before the first byte when the primary fails', async () => {
    router.failModels.add('deepseek/deepseek-chat');
    const res = await streamChat({ model: 'deepseek/deepseek-chat', messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(200);
    expect(events(res.text).at(-2)).toMatchObject({ model: 'google/gemini-2.5-flash', done: true });
  });

  it('streams from the Anthropic Messages API', async () => {
    const res = await streamChat({ model: 'anthropic/claude-sonnet-4-5', messages: [{ role: 'user', content: 'hey there claude' }] });
    const evs = events(res.text);
    expect(evs.at(-2)).toMatchObject({
      provider: 'anthropic',
      message: { content: 'Claude: hey there claude' },
      usage: { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27 },
    });
    expect(anthropic.requests.at(-1)!.body.stream).toBe(true);
  });

  it('a client disconnect mid-stream aborts the upstream request', async () => {
    router.holdStreams = true;
    const res = await request(`${base}/api/ai/chat`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ stream: true, model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'long answer' }] }),
    });
    expect(res.statusCode).toBe(200);
    // wait for the first delta, then go away
    for await (const chunk of res.body) {
      if (String(chunk).includes('delta')) break;
    }
    expect(router.aborted).toBe(0);
    res.body.destroy();
    await router.waitForAbort();
    expect(router.aborted).toBe(1);
  });

  it('a client disconnect during a non-streamed request aborts the upstream request', async () => {
    router.delayMs = 2_000;
    const controller = new AbortController();
    const pending = request(`${base}/api/ai/chat`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'slow' }] }),
      signal: controller.signal,
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    controller.abort();
    await pending;
    await router.waitForAbort();
    expect(router.aborted).toBe(1);
  });

  it('AI_TIMEOUT_MS bounds each attempt, then the fallback is tried', async () => {
    await withTestPlatform({ ROUTER_API_KEY: 'router-key', ROUTER_BASE_URL: router.url, AI_TIMEOUT_MS: '300' }, async (p) => {
      router.delayMs = 1_000;
      const started = Date.now();
      const res = await p.backend.inject({
        method: 'POST',
        url: '/api/ai/chat',
        headers,
        payload: { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] },
      });
      expect(res.statusCode).toBe(500);
      expect(Date.now() - started).toBeLessThan(1_500);
      expect(router.requests.map((r) => r.body.model)).toEqual(['openai/gpt-4o-mini', 'google/gemini-2.5-flash']);
    });
  });
});
