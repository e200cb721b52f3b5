/**
 * The built-in runtime's network without pasta (src/domains/agents/drivers/local/containment/agent-loopback.service.ts,
 * docs/security.md "Network"): the Unix-socket forwarders of the platform's ports, the gateway
 * socket the platform binds and hands over, and, where the sandbox runs here, a real agent that
 * chats through them, has no pasta, reaches nothing else, and keeps working when the platform
 * process that started it is killed and a new one takes over.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAgentClient } from '../../src/domains/agents/agent-client/agent.client.ts';
import { waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import type { AgentTarget, AgentTargets } from '../../src/domains/agents/agent-client/targets.service.ts';
import type { AgentDeploySpec, HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import {
  bindGatewaySocket,
  createLoopbackBridges,
  loopbackOnly,
} from '../../src/domains/agents/drivers/local/containment/agent-loopback.service.ts';
import { detectNetwork } from '../../src/domains/agents/drivers/local/containment/agent-network.service.ts';
import { isAlive, processTree, readComm } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { detectSandbox, FIRST_AGENT_UID } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';
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
  let base: string;
  let dir: string;
  let echo: Server;
  let port: number;
  const bridges = createLoopbackBridges();
  /** serves `base` with a gateway port of the kernel's choice and the echo server as its one platform port */
  const serve = (b = base, platform = [port]) => bridges.serve(b, { gateway: 0, platform }, false);

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'loopback-'));
    dir = join(base, 'loopback');
    // stands for the backend: answers each connection with what it got, uppercased
    echo = createServer((s) => s.on('data', (d) => s.end(String(d).toUpperCase())));
    await listening(echo, 0, '127.0.0.1');
    port = (echo.address() as { port: number }).port;
  });
  afterAll(async () => {
    await bridges.closeAll();
    echo.close();
    rmSync(base, { recursive: true, force: true });
  });

  it('serves <port>.sock, writable by any uid, in a folder only the platform may change, and forwards byte for byte', async () => {
    await serve();
    const sock = join(dir, `${port}.sock`);
    expect(lstatSync(sock).isSocket()).toBe(true);
    expect(statSync(sock).mode & 0o777).toBe(0o666);
    expect(statSync(dir).mode & 0o777).toBe(0o755);
    expect(statSync(dir).uid).toBe(process.getuid?.());
    expect(readdirSync(dir)).toEqual([`${port}.sock`]);
    expect(await roundTrip(sock, 'hello platform')).toBe('HELLO PLATFORM');
  });

  it('takes over a socket whose process is gone, and closing removes what it served', async () => {
    await bridges.close(base);
    expect(existsSync(join(dir, `${port}.sock`))).toBe(false);
    // a dead socket file (its server closed without removing it: a SIGKILLed platform)
    writeFileSync(join(dir, `${port}.sock`), '');
    await serve();
    expect(await roundTrip(join(dir, `${port}.sock`), 'again')).toBe('AGAIN');
  });

  it('accepts at most 256 connections per socket at once: an agent that opens them without end holds its own', async () => {
    const sock = join(dir, `${port}.sock`);
    const held: Socket[] = [];
    for (let i = 0; i < 256; i++) {
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
    // once the bridge has seen them go (a moment on a busy machine), connections are served again;
    // until then a connection is refused as above (closed, or EPIPE on its write)
    await vi.waitFor(async () => expect(await roundTrip(sock, 'after').catch(() => '')).toBe('AFTER'), { timeout: 5_000, interval: 50 });
  });

  it('an upstream that is down ends the agent connection instead of leaving it open', async () => {
    const other = createServer();
    await listening(other, 0, '127.0.0.1');
    const deadPort = (other.address() as { port: number }).port;
    await new Promise<void>((r) => other.close(() => r()));
    const deadBase = mkdtempSync(join(tmpdir(), 'loopback-dead-'));
    await serve(deadBase, [deadPort]);
    expect(await roundTrip(join(deadBase, 'loopback', `${deadPort}.sock`), 'anyone?')).toBe('');
    await bridges.close(deadBase);
    rmSync(deadBase, { recursive: true, force: true });
  });
});

describe('the gateway socket the platform binds and forwards to', () => {
  let base: string;
  const bridges = createLoopbackBridges();
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'loopback-gateway-'));
  });
  afterAll(async () => {
    await bridges.closeAll();
    rmSync(base, { recursive: true, force: true });
  });

  /** A child that serves the inherited descriptor 3 with `script` (it gets the socket as `s`). */
  const child = (fd: number, script: string) => {
    const c = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit', fd] });
    return { c, up: new Promise((r) => c.stdout!.once('data', r)) };
  };

  it('reaches the process that inherited the socket at 127.0.0.1:<port>; a taken port is replaced only for a new launch', async () => {
    const taken = createServer();
    await listening(taken, 0, '127.0.0.1');
    const takenPort = (taken.address() as { port: number }).port;
    await expect(bridges.serve(base, { gateway: takenPort, platform: [] }, false)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    const port = await bridges.serve(base, { gateway: takenPort, platform: [] }, true);
    expect(port).not.toBe(takenPort);
    const g = await bindGatewaySocket(base);
    expect(g.fd).toBeGreaterThan(2);
    const { c, up } = child(
      g.fd,
      "require('node:net').createServer((s) => s.end('from the child')).listen({ fd: 3 }, () => process.stdout.write('up'))",
    );
    g.close();
    // the socket keeps its name after the platform's copy is closed
    expect(lstatSync(join(base, 'gateway.sock')).isSocket()).toBe(true);
    await up;
    expect(await roundTrip({ port }, '')).toBe('from the child');
    c.kill('SIGKILL');
    taken.close();
    await bridges.close(base);
    expect(existsSync(join(base, 'gateway.sock'))).toBe(false);
  });

  const python = spawnSync('python3', ['-c', 'import socket'], { stdio: 'ignore' }).status === 0;
  it.skipIf(!python)(
    'cannot be turned into a client: the agent holding it reaches nothing on the host (a TCP socket handed over could)',
    async () => {
      const secret = createServer((s) => s.end('host-only'));
      await listening(secret, 0, '127.0.0.1');
      const secretPort = (secret.address() as { port: number }).port;
      let reached = false;
      secret.on('connection', () => {
        reached = true;
      });
      const g = await bindGatewaySocket(base);
      // what a hostile agent can do with the descriptor: shut it down and connect it elsewhere
      const attempt = `
import socket
s = socket.socket(fileno=3)
for how in (socket.SHUT_RD, socket.SHUT_RDWR):
    try: s.shutdown(how)
    except OSError: pass
out = []
for target in (('127.0.0.1', ${secretPort}), '${join(base, 'loopback-none.sock')}', '\\0abstract-test'):
    try:
        s.connect(target); out.append('connected')
    except Exception as e: out.append(type(e).__name__ + ':' + str(getattr(e, 'errno', '')))
print(' '.join(out), flush=True)
`;
      const c = spawn('python3', ['-c', attempt], { stdio: ['ignore', 'pipe', 'inherit', g.fd] });
      g.close();
      let out = '';
      c.stdout!.on('data', (d) => {
        out += d;
      });
      await new Promise((r) => c.once('exit', r));
      expect(out).not.toContain('connected');
      expect(out.trim().split(' ')).toHaveLength(3);
      await new Promise((r) => setTimeout(r, 100));
      expect(reached).toBe(false);
      secret.close();
      rmSync(join(base, 'gateway.sock'), { force: true });
    },
  );
});

describe("the platform's own clients of a local agent", () => {
  it('connect to the Unix socket that serves its origin, and over TCP to any other', async () => {
    const base = mkdtempSync(join(tmpdir(), 'loopback-client-'));
    const unixPath = join(base, 'gateway.sock');
    const answer = (who: string) => (req: IncomingMessage, res: ServerResponse) =>
      res.end(`${who} ${req.url} ${req.headers.authorization}`);
    const viaUnix = createHttpServer(answer('unix'));
    await listening(viaUnix, unixPath);
    const viaTcp = createHttpServer(answer('tcp'));
    await listening(viaTcp, 0, '127.0.0.1');
    const tcpPort = (viaTcp.address() as { port: number }).port;
    // an origin nothing listens on over TCP: only the Unix socket can answer for it
    const closed = createServer();
    await listening(closed, 0, '127.0.0.1');
    const unixOnlyPort = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));

    const targetAt = (port: number) => ({ agent: {} as AgentTarget['agent'], baseUrl: `http://127.0.0.1:${port}`, token: 'gw-token' });
    let port = unixOnlyPort;
    const targets = { byId: async () => targetAt(port), forget: () => {} } as unknown as AgentTargets;
    const gateway = createAgentClient({
      targets,
      localSocket: (origin) => (origin === `http://127.0.0.1:${unixOnlyPort}` ? unixPath : undefined),
    });
    try {
      const read = async () => {
        const { response } = await gateway.forward('u', 'a', { method: 'GET', path: '/v1/models', headers: {}, body: null });
        return response.body.text();
      };
      expect(await read()).toBe('unix /v1/models Bearer gw-token');
      port = tcpPort;
      expect(await read()).toBe('tcp /v1/models Bearer gw-token');
    } finally {
      await gateway.close();
      viaUnix.close();
      viaTcp.close();
      rmSync(base, { recursive: true, force: true });
    }
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
    // its forwarders died with that process: the agent lives on, unreachable until a platform serves it again
    await expect(chat(url, 'orphaned')).rejects.toThrow();

    driver = createHostingDriver(localDriverConfig(dataDir));
    // not before the backend's start: a web-only process never serves an agent's ports
    await expect(chat(url, 'not yet')).rejects.toThrow();
    await driver.ready?.();
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
