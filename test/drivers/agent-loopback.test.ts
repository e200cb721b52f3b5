/**
 * The built-in runtime's network without pasta (src/domains/agents/drivers/agent-loopback.ts,
 * docs/security.md "Network"): the Unix-socket forwarders of the platform's ports, the gateway
 * socket the platform binds and hands over, and, where the sandbox runs here, a real agent that
 * chats through them, has no pasta, reaches nothing else, and keeps working when the platform
 * process that started it is killed and a new one takes over.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForHealthy } from '../../src/domains/agents/container-health.ts';
import { bindGatewayPort, createLoopbackBridges, loopbackOnly } from '../../src/domains/agents/drivers/agent-loopback.ts';
import { detectNetwork } from '../../src/domains/agents/drivers/agent-network.ts';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.ts';
import { createHostingDriver } from '../../src/domains/agents/drivers/index.ts';
import { isAlive, processTree, readComm } from '../../src/domains/agents/drivers/proc.ts';
import { detectSandbox, FIRST_AGENT_UID } from '../../src/domains/agents/drivers/sandbox.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { localDriverConfig } from './local-config.ts';

const listening = (srv: Server, ...args: unknown[]) =>
  new Promise<void>((resolve) => (srv.listen as (...a: unknown[]) => void)(...args, () => resolve()));

/** Sends `line` on a new connection to `target` and resolves with everything the other side writes back. */
function roundTrip(target: string | { port: number }, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = typeof target === 'string' ? connect(target) : connect({ host: '127.0.0.1', port: target.port });
    let got = '';
    s.on('data', (d) => {
      got += d;
    });
    s.on('end', () => resolve(got));
    s.on('error', reject);
    s.end(line);
  });
}

describe('loopbackOnly: which agents can do without pasta', () => {
  it('gives the ports of loopback URLs, once each, and undefined when one URL is elsewhere', () => {
    expect(loopbackOnly(['http://127.0.0.1:4001', 'http://127.0.0.1:4001/api/agent-gateway/v1', undefined])).toEqual([4001]);
    expect(loopbackOnly(['http://localhost:80/x', 'https://[::1]/v1'])).toEqual([80, 443]);
    expect(loopbackOnly(['http://127.0.0.1:4001', 'https://api.example.com/v1'])).toBeUndefined();
    expect(loopbackOnly(['not a url'])).toBeUndefined();
    expect(loopbackOnly(['ftp://127.0.0.1:21'])).toBeUndefined();
    expect(loopbackOnly([])).toEqual([]);
  });
});

describe('the forwarders of the platform ports', () => {
  let dir: string;
  let echo: Server;
  let port: number;
  const bridges = createLoopbackBridges();

  beforeAll(async () => {
    dir = join(mkdtempSync(join(tmpdir(), 'loopback-')), 'loopback');
    // stands for the backend: answers each connection with what it got, uppercased
    echo = createServer((s) => s.on('data', (d) => s.end(String(d).toUpperCase())));
    await listening(echo, 0, '127.0.0.1');
    port = (echo.address() as { port: number }).port;
  });
  afterAll(async () => {
    await bridges.closeAll();
    echo.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves <port>.sock, writable by any uid, in a folder only the platform may change, and forwards byte for byte', async () => {
    // a socket file left by a platform process that died is replaced
    const stale = createServer();
    await listening(stale, join(dir, '..', 'stale.sock'));
    await bridges.serve(dir, [port]);
    const sock = join(dir, `${port}.sock`);
    expect(lstatSync(sock).isSocket()).toBe(true);
    expect(statSync(sock).mode & 0o777).toBe(0o666);
    expect(statSync(dir).mode & 0o777).toBe(0o755);
    expect(statSync(dir).uid).toBe(process.getuid?.());
    expect(readdirSync(dir)).toEqual([`${port}.sock`]);
    expect(await roundTrip(sock, 'hello platform')).toBe('HELLO PLATFORM');
    stale.close();
  });

  it('takes over a socket whose process is gone, and closing removes what it served', async () => {
    await bridges.close(dir);
    expect(existsSync(join(dir, `${port}.sock`))).toBe(false);
    // a dead socket file (its server closed without removing it: a SIGKILLed platform)
    writeFileSync(join(dir, `${port}.sock`), '');
    await bridges.serve(dir, [port]);
    expect(await roundTrip(join(dir, `${port}.sock`), 'again')).toBe('AGAIN');
  });

  it('accepts at most 64 connections per socket at once: an agent that opens them without end holds its own', async () => {
    const sock = join(dir, `${port}.sock`);
    const held: Socket[] = [];
    for (let i = 0; i < 64; i++) {
      const s = connect(sock);
      await new Promise((r) => s.once('connect', r));
      held.push(s);
    }
    const extra = connect(sock);
    extra.on('error', () => {}); // the write may meet the closed socket (EPIPE): what counts is that it closes
    const closedAt = await new Promise<string>((resolve) => {
      extra.on('data', () => resolve('data'));
      extra.once('close', () => resolve('closed'));
      extra.write('ping');
    });
    expect(closedAt).toBe('closed');
    for (const s of held) s.destroy();
    // once they are gone, connections are served again
    await new Promise((r) => setTimeout(r, 50));
    expect(await roundTrip(sock, 'after')).toBe('AFTER');
  });

  it('an upstream that is down ends the agent connection instead of leaving it open', async () => {
    const other = createServer();
    await listening(other, 0, '127.0.0.1');
    const deadPort = (other.address() as { port: number }).port;
    await new Promise<void>((r) => other.close(() => r()));
    const deadDir = `${dir}-dead`;
    await bridges.serve(deadDir, [deadPort]);
    expect(await roundTrip(join(deadDir, `${deadPort}.sock`), 'anyone?')).toBe('');
    await bridges.close(deadDir);
  });
});

describe('the gateway socket the platform binds', () => {
  it('binds the port asked for, or one the kernel picks when it is taken, and holds connections for the process that inherits it', async () => {
    const taken = createServer();
    await listening(taken, 0, '127.0.0.1');
    const takenPort = (taken.address() as { port: number }).port;
    const g = await bindGatewayPort(takenPort);
    expect(g.port).not.toBe(takenPort);
    expect(g.fd).toBeGreaterThan(2);
    // a child serving the inherited descriptor answers on that port
    const child = spawn(
      process.execPath,
      ['-e', "require('node:net').createServer((s) => s.end('from the child')).listen({ fd: 3 }, () => process.stdout.write('up'))"],
      { stdio: ['ignore', 'pipe', 'inherit', g.fd] },
    );
    g.close();
    await new Promise((r) => child.stdout!.once('data', r));
    expect(await roundTrip({ port: g.port }, '')).toBe('from the child');
    child.kill('SIGKILL');
    taken.close();
  });
});

const sandbox = detectSandbox('auto');
const bridged = detectNetwork('internet', sandbox.active, 'builtin').bridge === true;
if (!bridged) console.warn('test/drivers/agent-loopback.test.ts: no sandbox here, the sandboxed agent is not tested');

describe.skipIf(!bridged)('a sandboxed built-in agent on the platform sockets', () => {
  let dataDir: string;
  let upstream: FakeOpenAi;
  let hostService: Server;
  let driver: HostingDriver | undefined;
  const token = 't'.repeat(48);
  const spec = (): AgentDeploySpec => ({
    agentId: 'agent-bridge',
    userId: 'user-1',
    plan: 'solo',
    gatewayToken: token,
    platformApiKey: 'agent-key',
    backendUrl: upstream.baseUrl.replace(/\/v1$/, ''),
    sandboxUid: FIRST_AGENT_UID + 931,
    config: {},
    env: { AGENT_MODEL_BASE_URL: upstream.baseUrl, AGENT_MODEL_API_KEY: 'model-key', AGENT_MODEL: 'm' },
  });
  const chat = (url: string, text: string) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
    });

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'loopback-agent-'));
    upstream = await startFakeOpenAi({ apiKey: 'model-key' });
    hostService = createServer((s) => s.end('host-only\n'));
    await listening(hostService, 0, '127.0.0.1');
  });
  afterAll(async () => {
    await driver?.shutdown();
    await upstream?.close();
    hostService?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps chatting through its sockets after the platform process that started it is killed', async () => {
    // the first platform process: deploys the agent, then dies without a shutdown
    const first = spawn(
      process.execPath,
      [fileURLToPath(new URL('../fixtures/driver-child.ts', import.meta.url)), dataDir, JSON.stringify(spec())],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      first.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out);
      });
      first.once('exit', (code) => reject(new Error(`the platform child exited (${code})`)));
    });
    const { url } = JSON.parse(line) as { url: string };
    const base = join(dataDir, 'agents', 'agent-bridge');
    const state = JSON.parse(readFileSync(join(base, 'driver-state.json'), 'utf8'));
    // its platform ports over Unix sockets; no namespace file, so no pasta
    expect(state.loopbackPorts).toEqual([Number(new URL(upstream.baseUrl).port)]);
    expect(state.network).toBeUndefined();
    expect(readdirSync(base).filter((n) => n.startsWith('netns-'))).toEqual([]);
    expect(processTree(1).some((p) => /^(pasta|passt)/.test(readComm(p.pid) ?? ''))).toBe(false);
    // its network namespace is not the platform's, and holds loopback only
    expect(
      readFileSync(`/proc/${state.pid}/net/dev`, 'utf8')
        .match(/^\s*(\w+):/gm)
        ?.map((s) => s.trim()),
    ).toEqual(['lo:']);
    expect((await chat(url, 'first')).status).toBe(200);

    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    expect(isAlive(state.pid)).toBe(true);
    // the forwarder died with its process: the agent's model call fails until a platform serves it again
    const orphaned = await chat(url, 'orphaned');
    expect(orphaned.status).toBeGreaterThanOrEqual(500);

    driver = createHostingDriver(localDriverConfig(dataDir));
    const deadline = Date.now() + 5_000;
    let res = await chat(url, 'second');
    while (res.status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      res = await chat(url, 'second');
    }
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('Echo: second');
    // adopted (same launch), not restarted
    expect((await driver.deploy(spec())).externalId).toBe(`local-${state.pid}`);
    expect(await waitForHealthy(url, { timeoutMs: 5_000, intervalMs: 50 })).toBe(true);
  });

  it('delete stops it and its sockets', async () => {
    const base = join(dataDir, 'agents', 'agent-bridge');
    const pid = JSON.parse(readFileSync(join(base, 'driver-state.json'), 'utf8')).pid as number;
    await driver!.delete('agent-bridge');
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(base)).toBe(false);
  });
});
