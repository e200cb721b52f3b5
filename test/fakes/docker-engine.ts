/**
 * A local Docker Engine API (the subset the docker driver calls through dockerode), in memory, on
 * a unix socket and on TCP: containers created from known images (404 "No such image" otherwise),
 * start/stop/restart/pause/unpause with the engine's 204/304/409 answers, inspect, list filtered by
 * label, DELETE (force), logs in the multiplexed stdout/stderr framing, one-shot stats, and
 * POST /images/create streaming pull progress as JSON lines. Status codes and bodies follow the
 * Engine API (and were compared with `podman system service`).
 *
 * Each running container's published gateway port is a real listener on 127.0.0.1 whose
 * GET /healthz answers `{ok:true,status:'live'}` while the container runs unpaused (503 when the
 * test marks it `silent`), so the platform's own probes reach "the agent" end to end.
 *
 * Fault injection: `down = true` drops every connection (an engine that is not there); `fail()`
 * answers the next matching call with a status; `pullError` makes a pull stream end in an error.
 * Health is whatever the test sets (`Health.Status` starts as `starting` like a real engine's).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type PortBinding = { HostIp: string; HostPort: string };

export type FakeContainer = {
  Id: string;
  Name: string;
  Created: string;
  Config: {
    Image: string;
    User?: string;
    Env: string[];
    Labels: Record<string, string>;
    Healthcheck?: { Test: string[]; Interval?: number; Timeout?: number; Retries?: number; StartPeriod?: number };
    ExposedPorts?: Record<string, object>;
    [key: string]: unknown;
  };
  HostConfig: Record<string, unknown> & { PortBindings?: Record<string, PortBinding[]>; Memory?: number };
  State: {
    Status: 'created' | 'running' | 'paused' | 'restarting' | 'exited' | 'dead';
    Running: boolean;
    Paused: boolean;
    Restarting: boolean;
    OOMKilled: boolean;
    Dead: boolean;
    Pid: number;
    ExitCode: number;
    Error: string;
    StartedAt: string;
    FinishedAt: string;
    Health?: { Status: 'starting' | 'healthy' | 'unhealthy'; FailingStreak: number; Log: unknown[] };
  };
  NetworkSettings: { Ports: Record<string, PortBinding[] | null> };
  RestartCount: number;
  /** what the container "printed": stream 1 stdout, 2 stderr */
  output: { stream: 1 | 2; at: string; text: string }[];
  /** its gateway's /healthz answers 503 (a running container whose gateway is silent) */
  silent?: boolean;
  /** the numbers its stats endpoint reports (cpu in ns, memory in bytes) */
  usage: Record<'cpuNs' | 'preCpuNs' | 'systemNs' | 'preSystemNs' | 'cpus' | 'memory' | 'inactiveFile' | 'rx' | 'tx' | 'pids', number>;
};

export type FakeDockerEngine = {
  /** DOCKER_HOST values that reach this engine */
  unixHost: string;
  tcpHost: string;
  containers: Map<string, FakeContainer>;
  images: Set<string>;
  requests: { method: string; path: string; query: URLSearchParams; body?: unknown }[];
  down: boolean;
  /** the next pull streams this error as its last progress line */
  pullError: string | undefined;
  byName(name: string): FakeContainer | undefined;
  /** the next `times` calls whose method matches and path matches answer `status` */
  fail(method: string, path: RegExp, status: number, times?: number): void;
  close(): Promise<void>;
};

const readJson = (req: IncomingMessage) =>
  new Promise<unknown>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });

/** Image references without a tag or digest mean `:latest`, as the engine resolves them. */
const normalizeImage = (ref: string) => (/[:@][^/]*$/.test(ref) ? ref : `${ref}:latest`);

/** One frame of the log endpoint's stream: [stream, 0, 0, 0, size uint32 BE] + payload. */
export function frame(stream: 1 | 2, payload: string): Buffer {
  const data = Buffer.from(payload, 'utf8');
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(data.length, 4);
  return Buffer.concat([header, data]);
}

export async function startFakeDockerEngine(options: { images?: string[] } = {}): Promise<FakeDockerEngine> {
  const dir = mkdtempSync(join(tmpdir(), 'fake-docker-'));
  const socketPath = join(dir, 'docker.sock');
  const gateways = new Map<string, Server>();
  const faults: { method: string; path: RegExp; status: number; times: number }[] = [];
  const engine: FakeDockerEngine = {
    unixHost: `unix://${socketPath}`,
    tcpHost: '',
    containers: new Map(),
    images: new Set((options.images ?? []).map(normalizeImage)),
    requests: [],
    down: false,
    pullError: undefined,
    byName: (name) => [...engine.containers.values()].find((c) => c.Name === `/${name}`),
    fail: (method, path, status, times = 1) => faults.push({ method, path, status, times }),
    close: async () => {},
  };

  const send = (res: ServerResponse, status: number, body?: unknown) => {
    if (body === undefined) {
      res.writeHead(status);
      res.end();
      return;
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const message = (res: ServerResponse, status: number, text: string) => send(res, status, { message: text });

  const find = (ref: string) =>
    engine.containers.get(ref) ?? engine.byName(ref) ?? [...engine.containers.values()].find((c) => c.Id.startsWith(ref));
  const now = () => new Date().toISOString();

  /** The container's gateway: a listener on a port the OS picks, as an engine picks a host port. */
  async function openGateway(c: FakeContainer): Promise<string> {
    const server = createServer((req, res) => {
      const live = engine.containers.get(c.Id) === c && c.State.Running && !c.State.Paused && !c.silent;
      if (req.url === '/healthz' && live) return send(res, 200, { ok: true, status: 'live' });
      return send(res, 503, { ok: false });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    gateways.set(c.Id, server);
    return String((server.address() as AddressInfo).port);
  }
  async function closeGateway(c: FakeContainer) {
    const server = gateways.get(c.Id);
    gateways.delete(c.Id);
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }

  async function run(c: FakeContainer) {
    c.State = {
      ...c.State,
      Status: 'running',
      Running: true,
      Paused: false,
      Restarting: false,
      ExitCode: 0,
      Pid: 1000 + Math.floor(Math.random() * 1000),
      StartedAt: now(),
    };
    if (c.Config.Healthcheck) c.State.Health = { Status: 'starting', FailingStreak: 0, Log: [] };
    // dynamically published ports get a host port each time the container starts
    for (const [key, bindings] of Object.entries(c.HostConfig.PortBindings ?? {})) {
      const ports: PortBinding[] = [];
      for (const b of bindings) ports.push({ HostIp: b.HostIp || '0.0.0.0', HostPort: b.HostPort || (await openGateway(c)) });
      c.NetworkSettings.Ports[key] = ports;
    }
    c.output.push({ stream: 1, at: now(), text: 'gateway listening on 18789' });
  }
  async function halt(c: FakeContainer) {
    c.State = { ...c.State, Status: 'exited', Running: false, Paused: false, Pid: 0, FinishedAt: now() };
    c.NetworkSettings.Ports = {};
    await closeGateway(c);
  }

  function logs(res: ServerResponse, c: FakeContainer, q: URLSearchParams) {
    const wanted = new Set<number>([
      ...(q.get('stdout') === 'true' || q.get('stdout') === '1' ? [1] : []),
      ...(q.get('stderr') === 'true' || q.get('stderr') === '1' ? [2] : []),
    ]);
    let lines = c.output.filter((l) => wanted.has(l.stream));
    const tail = q.get('tail');
    if (tail && tail !== 'all') lines = lines.slice(-Number(tail));
    res.writeHead(200, { 'content-type': 'application/vnd.docker.multiplexed-stream' });
    // one write per frame: the client sees frames split across reads as a real engine sends them
    for (const l of lines) {
      const ts = q.get('timestamps') === 'true' || q.get('timestamps') === '1' ? `${l.at.replace('Z', '000000Z')} ` : '';
      res.write(frame(l.stream, `${ts}${l.text}\n`));
    }
    res.end();
  }

  function stats(c: FakeContainer) {
    const u = c.usage;
    const live = c.State.Running;
    return {
      read: now(),
      preread: new Date(Date.now() - 1000).toISOString(),
      pids_stats: { current: live ? u.pids : 0 },
      num_procs: 0,
      cpu_stats: { cpu_usage: { total_usage: live ? u.cpuNs : 0 }, system_cpu_usage: u.systemNs, online_cpus: u.cpus },
      precpu_stats: { cpu_usage: { total_usage: live ? u.preCpuNs : 0 }, system_cpu_usage: u.preSystemNs, online_cpus: u.cpus },
      memory_stats: {
        usage: live ? u.memory : 0,
        limit: c.HostConfig.Memory || 8 * 1024 ** 3,
        stats: { inactive_file: live ? u.inactiveFile : 0 },
      },
      networks: {
        eth0: { rx_bytes: u.rx, tx_bytes: u.tx, rx_packets: 0, tx_packets: 0, rx_errors: 0, tx_errors: 0, rx_dropped: 0, tx_dropped: 0 },
      },
    };
  }

  async function pull(res: ServerResponse, q: URLSearchParams) {
    const ref = `${q.get('fromImage')}:${q.get('tag') ?? 'latest'}`;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`${JSON.stringify({ status: `Pulling from ${q.get('fromImage')}`, id: q.get('tag') })}\n`);
    if (engine.pullError) {
      const error = engine.pullError;
      engine.pullError = undefined;
      res.end(`${JSON.stringify({ errorDetail: { message: error }, error })}\n`);
      return;
    }
    res.write(`${JSON.stringify({ status: 'Downloading', progressDetail: { current: 1, total: 2 }, id: 'layer1' })}\n`);
    engine.images.add(normalizeImage(ref));
    res.end(`${JSON.stringify({ status: `Status: Downloaded newer image for ${ref}` })}\n`);
  }

  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    if (engine.down) {
      req.socket.destroy();
      return;
    }
    const u = new URL(req.url ?? '/', 'http://engine');
    // clients may pin an API version: /v1.41/containers/...
    const path = u.pathname.replace(/^\/v\d+\.\d+(?=\/)/, '');
    const method = req.method ?? 'GET';
    const body = method === 'POST' ? await readJson(req) : undefined;
    engine.requests.push({ method, path, query: u.searchParams, body });
    const fault = faults.find((f) => f.method === method && f.path.test(path) && f.times > 0);
    if (fault) {
      fault.times -= 1;
      return message(res, fault.status, `injected ${fault.status}`);
    }

    if (path === '/_ping') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('OK');
    }
    if (path === '/images/create' && method === 'POST') return pull(res, u.searchParams);

    if (path === '/containers/json' && method === 'GET') {
      const all = u.searchParams.get('all') === 'true' || u.searchParams.get('all') === '1';
      const filters = JSON.parse(u.searchParams.get('filters') ?? '{}') as { label?: string[] };
      const list = [...engine.containers.values()].filter(
        (c) =>
          (all || c.State.Running) &&
          (filters.label ?? []).every((l) => {
            const [k, ...v] = l.split('=');
            return v.length ? c.Config.Labels[k!] === v.join('=') : k! in c.Config.Labels;
          }),
      );
      return send(
        res,
        200,
        list.map((c) => ({
          Id: c.Id,
          Names: [c.Name],
          Image: c.Config.Image,
          Labels: c.Config.Labels,
          State: c.State.Status,
          Status: c.State.Status,
        })),
      );
    }

    if (path === '/containers/create' && method === 'POST') {
      const b = (body ?? {}) as FakeContainer['Config'] & { HostConfig?: FakeContainer['HostConfig'] };
      const name = u.searchParams.get('name') ?? '';
      if (!b.Image) return message(res, 400, 'config cannot be empty in order to create a container');
      if (!engine.images.has(normalizeImage(b.Image))) return message(res, 404, `No such image: ${b.Image}`);
      if (name && engine.byName(name)) return message(res, 409, `Conflict. The container name "/${name}" is already in use`);
      const { HostConfig, ...config } = b;
      const c: FakeContainer = {
        Id: randomBytes(32).toString('hex'),
        Name: `/${name || randomBytes(4).toString('hex')}`,
        Created: now(),
        Config: { ...config, Env: config.Env ?? [], Labels: config.Labels ?? {} },
        HostConfig: HostConfig ?? {},
        State: {
          Status: 'created',
          Running: false,
          Paused: false,
          Restarting: false,
          OOMKilled: false,
          Dead: false,
          Pid: 0,
          ExitCode: 0,
          Error: '',
          StartedAt: '0001-01-01T00:00:00Z',
          FinishedAt: '0001-01-01T00:00:00Z',
        },
        NetworkSettings: { Ports: {} },
        RestartCount: 0,
        output: [],
        usage: { cpuNs: 0, preCpuNs: 0, systemNs: 0, preSystemNs: 0, cpus: 1, memory: 0, inactiveFile: 0, rx: 0, tx: 0, pids: 1 },
      };
      engine.containers.set(c.Id, c);
      return send(res, 201, { Id: c.Id, Warnings: [] });
    }

    const m = /^\/containers\/([^/]+)(?:\/([a-z]+))?$/.exec(path);
    if (m) {
      const c = find(decodeURIComponent(m[1]!));
      if (!c) return message(res, 404, `No such container: ${m[1]}`);
      const action = m[2];
      if (!action && method === 'DELETE') {
        const force = u.searchParams.get('force') === 'true' || u.searchParams.get('force') === '1';
        if (c.State.Running && !force)
          return message(
            res,
            409,
            `You cannot remove a running container ${c.Id}. Stop the container before attempting removal or force remove`,
          );
        engine.containers.delete(c.Id);
        await closeGateway(c);
        return send(res, 204);
      }
      if (action === 'json' && method === 'GET') {
        const { output: _o, usage: _u, ...info } = c;
        return send(res, 200, info);
      }
      if (action === 'logs' && method === 'GET') return logs(res, c, u.searchParams);
      if (action === 'stats' && method === 'GET') return send(res, 200, stats(c));
      if (method !== 'POST') return message(res, 404, 'page not found');
      switch (action) {
        case 'start':
          if (c.State.Running) return send(res, 304);
          await run(c);
          return send(res, 204);
        case 'stop':
          if (!c.State.Running) return send(res, 304);
          await halt(c);
          return send(res, 204);
        case 'restart':
          if (c.State.Paused) return message(res, 409, `Cannot restart container ${c.Id}: container is paused`);
          await halt(c);
          await run(c);
          c.RestartCount += 1;
          return send(res, 204);
        case 'pause':
          if (!c.State.Running) return message(res, 409, `Container ${c.Id} is not running`);
          if (c.State.Paused) return message(res, 409, `Container ${c.Id} is already paused`);
          c.State = { ...c.State, Status: 'paused', Paused: true };
          return send(res, 204);
        case 'unpause':
          if (!c.State.Paused) return message(res, 409, `Container ${c.Id} is not paused`);
          c.State = { ...c.State, Status: 'running', Paused: false };
          return send(res, 204);
      }
    }
    return message(res, 404, 'page not found');
  };

  const sockets = new Set<Socket>();
  const servers = [createServer(handler), createServer(handler)];
  for (const s of servers)
    s.on('connection', (sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
    });
  await new Promise<void>((r) => servers[0]!.listen(socketPath, r));
  await new Promise<void>((r) => servers[1]!.listen(0, '127.0.0.1', r));
  engine.tcpHost = `tcp://127.0.0.1:${(servers[1]!.address() as AddressInfo).port}`;
  engine.close = async () => {
    for (const c of engine.containers.values()) await closeGateway(c);
    for (const sock of sockets) sock.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    rmSync(dir, { recursive: true, force: true });
  };
  return engine;
}
