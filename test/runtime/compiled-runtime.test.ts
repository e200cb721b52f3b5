/**
 * The runtime as `npm start` runs agents: compiled (scripts/build-server.ts) and started by the
 * compiled local driver with its V8 flags, --jitless among them, which turns WebAssembly off. The
 * other tests run the runtime from its sources (where the type stripper needs WebAssembly, so the
 * driver leaves the JIT on): only here would a module that needs WebAssembly at runtime (fetch's
 * HTTP parser, for one) show up, as a chat that fails. HTTP, streamed and WebSocket chat and the
 * heartbeat, against the fake model provider.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildServer } from '../../scripts/build-server.ts';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import type { createLocalDriver as CreateLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const out = join(ROOT, `.dist-test-runtime-${process.pid}`);
const token = 'c'.repeat(48);
const auth = { authorization: `Bearer ${token}` };
let dataDir: string;
let upstream: FakeOpenAi;
let driver: HostingDriver | undefined;
let url: string;
let pid: number;

beforeAll(async () => {
  buildServer(out);
  upstream = await startFakeOpenAi({ quiet: true });
  dataDir = mkdtempSync(join(tmpdir(), 'compiled-runtime-'));
  const { createLocalDriver } = (await import(
    pathToFileURL(join(out, 'domains', 'agents', 'drivers', 'local', 'local.driver.js')).href
  )) as {
    createLocalDriver: typeof CreateLocalDriver;
  };
  driver = createLocalDriver({ dataDir, runtime: 'builtin', sandbox: 'off', network: 'host' });
  const d = await driver.deploy({
    agentId: 'compiled-agent',
    userId: 'u1',
    plan: 'solo',
    gatewayToken: token,
    platformApiKey: 'apk_compiled',
    backendUrl: 'http://127.0.0.1:9',
    config: {},
    env: { AGENT_MODEL_BASE_URL: upstream.baseUrl, AGENT_MODEL: 'm' },
  });
  url = d.url;
  pid = JSON.parse(readFileSync(join(dataDir, 'agents', 'compiled-agent', 'driver-state.json'), 'utf8')).pid;
  const deadline = Date.now() + 20_000;
  while (
    !(await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error('the compiled runtime did not answer /healthz');
    await new Promise((r) => setTimeout(r, 25));
  }
}, 60_000);

afterAll(async () => {
  await driver?.shutdown();
  await upstream?.close();
  rmSync(out, { recursive: true, force: true });
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('the compiled runtime, as npm start launches it', () => {
  it('runs the compiled entry without the JIT and with a 1 MB young generation', () => {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(argv).toContain('--jitless');
    expect(argv).toContain('--max-semi-space-size=1');
    expect(argv.some((a) => a.endsWith(join('runtime', 'main.js')))).toBe(true);
  });

  it('answers a chat, a streamed chat, a WebSocket chat and a heartbeat through its model', async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const plain = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
    expect(plain.status).toBe(200);
    expect(((await plain.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('Echo: hi');

    const streamed = await post('/v1/chat/completions', { stream: true, messages: [{ role: 'user', content: 'flow' }] });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain('data: [DONE]');

    const ws = new WebSocket(`${url.replace('http', 'ws')}/ws`, { headers: auth });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const frame = new Promise<unknown>((r) => ws.once('message', (m) => r(JSON.parse(String(m)))));
    ws.send(JSON.stringify({ type: 'chat', content: 'socket' }));
    expect(await frame).toEqual({ type: 'reply', content: 'Echo: socket' });
    ws.close();

    const beat = await post('/v1/heartbeat', { runId: 'compiled-1' });
    expect(beat.status).toBe(200);
    expect(await beat.json()).toMatchObject({ ok: true, runId: 'compiled-1', model: 'm' });
  });
});
