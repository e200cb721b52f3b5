/**
 * The built-in runtime's network without pasta (docs/security.md "Network", docs/benchmarks.md
 * "Memory of one built-in-runtime agent"): a sandboxed built-in agent runs in a network namespace
 * that holds nothing but its own loopback (bwrap --unshare-net), and what it needs from outside
 * comes through Unix sockets the platform makes and serves:
 *   - **its gateway**: the platform binds a Unix socket in the agent's platform folder (`gateway.sock`,
 *     never visible to the agent) and hands the listening socket over as a file descriptor
 *     (AGENT_LISTEN_FD); the platform listens on 127.0.0.1:<port> itself and forwards each connection
 *     to it, so the platform, the watchdog and the proxy reach the agent at the same URL as before;
 *   - **the platform's backend port(s)** it calls (its AI gateway, its callbacks): a Unix socket per
 *     port, `<port>.sock` in a platform-owned folder of the agent (`loopback/`, outside its workspace
 *     and home) bound read-only into the sandbox (AGENT_LOOPBACK_SOCKETS); the platform forwards each
 *     connection byte for byte to 127.0.0.1:<port>. That is exactly pasta's `-T <ports>` forward, and
 *     the backend sees the same 127.0.0.1 client.
 * What this saves is pasta itself, ~30 MB resident per agent (its packet buffers), most of what an
 * idle agent costs the machine. The runtime makes no other connection (it has no tools), so it loses
 * nothing: nothing on the host's loopback but those ports, no other agent, no internet. OpenClaw,
 * whose tools use the internet, and an agent whose platform URLs are not on this machine keep pasta.
 *
 * Why the gateway is a Unix socket and not the TCP port itself: a TCP socket belongs to the network
 * namespace it was made in, and a listening one handed to the agent can be turned back into a client
 * (shutdown(2) takes it to CLOSE, connect(2) then reaches anything on the host's loopback: PostgreSQL,
 * Redis). A listening Unix socket refuses connect(2) whatever is done to it, and reaches no network.
 *
 * Hostile agents: the folders are the platform's (root; `loopback/` 0755 and read-only in the sandbox,
 * the agent's folder itself 0700), so the agent can neither replace a socket nor plant a link where
 * the platform binds or connects; a connection only ever leads to the fixed host port; each agent's
 * platform sockets accept at most PLATFORM_CONNECTIONS (256) at once, so an agent that opens connections
 * without end holds its own few descriptors, not the platform's.
 *
 * These forwarders live in the platform process: while none runs the agent is unreachable (as it has
 * no one to answer to), and the next backend process serves its agents again as it starts (local.driver.ts ready()).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { accepts, loopbackTarget } from './agent-network.service.ts';

/**
 * Open connections per agent platform socket. The runtime holds one per model call in flight (4 by
 * default, AGENT_MAX_CONCURRENT_MODEL_CALLS) and one per chat turn it reports; a connection over the
 * bound is closed at once, which the agent sees as an unreachable model (502), so it sits well above
 * what a busy agent uses (64 chats at once in bench/agent-proxy.bench.ts needed ~130) and still
 * bounds what an agent that opens connections without end costs the platform (two descriptors each).
 */
const PLATFORM_CONNECTIONS = 256;
/** Open connections to one agent's gateway (the proxy keeps up to 256 per agent; health probes, WebSockets). */
const GATEWAY_CONNECTIONS = 1024;

/** The agent's platform-port sockets, in its platform folder. */
export const LOOPBACK_DIR = 'loopback';
/** The agent's gateway socket, in its platform folder (not in the sandbox). */
const GATEWAY_SOCKET = 'gateway.sock';
/** sun_path holds 108 bytes with its terminating NUL */
const UNIX_PATH_MAX = 107;

/**
 * The loopback ports `urls` name, or undefined when one of them is somewhere else (that agent needs
 * a route out, which only pasta gives it).
 */
export function loopbackOnly(urls: (string | undefined)[]): number[] | undefined {
  const ports = new Set<number>();
  for (const raw of urls) {
    if (!raw) continue;
    const target = loopbackTarget(raw);
    if (!target || (target.protocol !== 'http:' && target.protocol !== 'https:')) return undefined;
    ports.add(target.port);
  }
  return [...ports].sort((a, b) => a - b);
}

/** Whether the agent folder `base` is short enough for its sockets' paths (else the agent keeps pasta). */
export const socketPathsFit = (base: string) =>
  Buffer.byteLength(join(base, LOOPBACK_DIR, '65535.sock')) <= UNIX_PATH_MAX &&
  Buffer.byteLength(join(base, `${GATEWAY_SOCKET}.${'0'.repeat(12)}`)) <= UNIX_PATH_MAX;

/**
 * The listening Unix socket of the agent's gateway, at `<base>/gateway.sock`, for the runtime to
 * inherit as `fd`. Call `close()` right after the spawn that inherits it: until then this process
 * would accept the connections itself, so nothing may await in between. (Bound under a temporary
 * name and renamed: closing a Unix server in Node unlinks the name it was bound to, which then no
 * longer exists, so the socket the agent holds keeps its path.)
 */
export async function bindGatewaySocket(base: string): Promise<{ fd: number; close(): void }> {
  const path = join(base, GATEWAY_SOCKET);
  const tmp = `${path}.${randomBytes(6).toString('hex')}`;
  const srv = createServer();
  // never serves: a connection accepted here before the hand-over is refused, not left hanging
  srv.on('connection', (s: Socket) => s.destroy());
  await listenOn(srv, { path: tmp });
  const fd = (srv as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    srv.close();
    throw new Error('could not read the descriptor of the gateway socket');
  }
  renameSync(tmp, path);
  return { fd, close: () => srv.close() };
}

type Served = { gatewayPort: number; servers: Server[] };

/** The forwarders of the agents this platform process serves, by agent folder. */
export function createLoopbackBridges(log?: (level: 'info' | 'warn', message: string) => void) {
  const open = new Map<string, Served>();

  /**
   * Serves the agent whose platform folder is `base`: 127.0.0.1:`gateway` forwarded to its gateway
   * socket, and `<base>/loopback/<port>.sock` forwarded to 127.0.0.1:<port> for each platform port.
   * A gateway port that is taken is replaced by one the kernel picks when `anyPortIfTaken` (a new
   * launch), and is an error otherwise (the agent's URL is recorded). Resolves with the gateway port.
   * A platform socket another live platform process on the same DATA_DIR serves is left to it.
   */
  async function serve(base: string, ports: { gateway: number; platform: number[] }, anyPortIfTaken: boolean): Promise<number> {
    const served = open.get(base);
    if (served) return served.gatewayPort;
    const entry: Served = { gatewayPort: ports.gateway, servers: [] };
    open.set(base, entry);
    try {
      const gateway = createServer({ allowHalfOpen: true, noDelay: true }, (client) =>
        forward(client, { path: join(base, GATEWAY_SOCKET) }),
      );
      gateway.maxConnections = GATEWAY_CONNECTIONS;
      try {
        await listen(gateway, { host: '127.0.0.1', port: ports.gateway });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !anyPortIfTaken) throw err;
        await listen(gateway, { host: '127.0.0.1', port: 0 });
      }
      entry.servers.push(gateway);
      entry.gatewayPort = (gateway.address() as { port: number }).port;

      const dir = join(base, LOOPBACK_DIR);
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      chmodSync(dir, 0o755); // traversable by the agent's user, writable by the platform only
      for (const port of ports.platform) {
        const path = join(dir, `${port}.sock`);
        if (await answers(path)) continue;
        rmSync(path, { force: true });
        const srv = createServer({ allowHalfOpen: true }, (client) => forward(client, { host: '127.0.0.1', port }));
        srv.maxConnections = PLATFORM_CONNECTIONS;
        await listen(srv, { path });
        // connect(2) on a Unix socket needs write permission on it: the agent's own uid has none otherwise
        chmodSync(path, 0o666);
        entry.servers.push(srv);
      }
      return entry.gatewayPort;
    } catch (err) {
      await close(base);
      throw err;
    }
  }

  async function listen(srv: Server, at: { host: string; port: number } | { path: string }): Promise<void> {
    await listenOn(srv, at);
    srv.on('error', (err) => log?.('warn', `agent socket ${JSON.stringify(at)}: ${err.message}`));
  }

  /** Stops serving the agent of `base` and removes its gateway socket (the agent is gone or being replaced). */
  async function close(base: string): Promise<void> {
    const served = open.get(base);
    open.delete(base);
    // closing a listening Unix socket removes its file; connections already forwarded run out on their own
    await Promise.all((served?.servers ?? []).map((s) => new Promise<void>((r) => s.close(() => r()))));
    rmSync(join(base, GATEWAY_SOCKET), { force: true });
  }

  async function closeAll(): Promise<void> {
    await Promise.all([...open.keys()].map(close));
  }

  /**
   * The gateway socket of the agent this process serves on 127.0.0.1:`port`: the platform's own
   * clients connect to it directly instead of through the forwarder (one relay less per request).
   */
  function gatewaySocketFor(port: number): string | undefined {
    for (const [base, served] of open) if (served.gatewayPort === port) return join(base, GATEWAY_SOCKET);
    return undefined;
  }

  return { serve, close, closeAll, gatewaySocketFor };
}

export type LoopbackBridges = ReturnType<typeof createLoopbackBridges>;

/**
 * Pipes one connection to `to` (a TCP port on the host's loopback, or a Unix socket), both ways,
 * half-closes included (as pasta's forward does); an error on either side ends both.
 */
function forward(client: Socket, to: { host: string; port: number } | { path: string }) {
  const upstream = 'path' in to ? connect({ path: to.path, allowHalfOpen: true }) : connect({ ...to, allowHalfOpen: true, noDelay: true });
  const fail = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', fail).on('close', (hadError) => hadError && fail());
  upstream.on('error', fail).on('close', (hadError) => hadError && fail());
  client.pipe(upstream);
  upstream.pipe(client);
}

/** Resolves once `srv` listens at `at`; rejects with the listen error. */
function listenOn(srv: Server, at: { host: string; port: number } | { path: string }): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(at, () => {
      srv.off('error', reject);
      resolve();
    });
  });
}

/** Whether a live process listens on the Unix socket `path` (a socket left by a process that died refuses). */
async function answers(path: string): Promise<boolean> {
  try {
    if (!lstatSync(path).isSocket()) return false;
  } catch {
    return false;
  }
  return accepts({ path });
}
