/**
 * The built-in runtime's network without pasta (docs/security.md "Network", docs/benchmarks.md
 * "Memory of one built-in-runtime agent"): a sandboxed built-in agent runs in a network namespace
 * that holds nothing but its own loopback (bwrap --unshare-net), and the two things it needs from
 * outside come through descriptors the platform makes:
 *   - **its gateway port**: the platform binds 127.0.0.1:<port> on the host and hands the listening
 *     socket to the runtime as a file descriptor (AGENT_LISTEN_FD). A socket keeps the namespace it
 *     was made in, so the platform (and the watchdog) reach the agent at the same URL as before, and
 *     the port is the agent's from the moment it is chosen (no window for another process to take it);
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
 * Hostile agents: the folder is the platform's (root, 0755) and read-only in the sandbox, so the agent
 * can neither replace a socket nor plant a link where the platform listens; a connection only ever
 * leads to the fixed host port; each agent's sockets accept at most MAX_CONNECTIONS at once, so an
 * agent that opens connections without end holds its own few descriptors, not the platform's.
 */
import { chmodSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';

/** Open connections per agent socket: far above what the runtime's model-call limit uses (AGENT_MAX_CONCURRENT_MODEL_CALLS). */
const MAX_CONNECTIONS = 64;

export const LOOPBACK_DIR = 'loopback';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * The loopback ports `urls` name, or undefined when one of them is somewhere else (that agent needs
 * a route out, which only pasta gives it).
 */
export function loopbackOnly(urls: (string | undefined)[]): number[] | undefined {
  const ports = new Set<number>();
  for (const raw of urls) {
    if (!raw) continue;
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      return undefined;
    }
    if (!LOOPBACK_HOSTS.has(u.hostname) || (u.protocol !== 'http:' && u.protocol !== 'https:')) return undefined;
    ports.add(Number(u.port || (u.protocol === 'https:' ? 443 : 80)));
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * A listening socket on 127.0.0.1:`port` for a child to inherit. `port` 0, or a port that is taken,
 * gets one the kernel picks. Call `close()` right after the spawn that inherits `fd`: until then
 * this process would accept the connections itself, so nothing may await in between.
 */
export async function bindGatewayPort(port: number): Promise<{ port: number; fd: number; close(): void }> {
  const listen = (p: number) =>
    new Promise<Server>((resolve, reject) => {
      const srv = createServer();
      // never serves: a connection accepted here before the hand-over is refused, not left hanging
      srv.on('connection', (s: Socket) => s.destroy());
      srv.once('error', reject);
      srv.listen({ host: '127.0.0.1', port: p }, () => resolve(srv));
    });
  let srv: Server;
  try {
    srv = await listen(port);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || port === 0) throw err;
    srv = await listen(0);
  }
  const fd = (srv as unknown as { _handle?: { fd?: number } })._handle?.fd;
  const addr = srv.address();
  if (typeof fd !== 'number' || fd < 0 || typeof addr !== 'object' || !addr) {
    srv.close();
    throw new Error('could not read the descriptor of the gateway socket');
  }
  return { port: addr.port, fd, close: () => srv.close() };
}

/** The Unix-socket forwarders of the agents this platform process serves. */
export function createLoopbackBridges(log?: (level: 'info' | 'warn', message: string) => void) {
  const open = new Map<string, Server[]>();

  /**
   * Serves `<dir>/<port>.sock` for each port (forwarding to 127.0.0.1:<port>), replacing what was
   * there. Another live platform process on the same DATA_DIR that serves a socket already keeps it.
   */
  async function serve(dir: string, ports: number[]): Promise<void> {
    if (open.has(dir)) return;
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755); // traversable by the agent's user, writable by the platform only
    const servers: Server[] = [];
    open.set(dir, servers);
    try {
      for (const port of ports) {
        const path = join(dir, `${port}.sock`);
        if (await answers(path)) continue;
        rmSync(path, { force: true });
        const srv = createServer({ allowHalfOpen: true }, (client) => forward(client, port));
        srv.maxConnections = MAX_CONNECTIONS;
        await new Promise<void>((resolve, reject) => {
          srv.once('error', reject);
          srv.listen(path, () => {
            srv.off('error', reject);
            resolve();
          });
        });
        srv.on('error', (err) => log?.('warn', `agent loopback socket ${path}: ${err.message}`));
        // connect(2) on a Unix socket needs write permission on it: the agent's own uid has none otherwise
        chmodSync(path, 0o666);
        servers.push(srv);
      }
    } catch (err) {
      await close(dir);
      throw err;
    }
  }

  /** Stops serving `dir` and removes its sockets (the agent is gone or being replaced). */
  async function close(dir: string): Promise<void> {
    const servers = open.get(dir);
    open.delete(dir);
    // closing a listening Unix socket removes its file; connections already forwarded run out on their own
    await Promise.all((servers ?? []).map((s) => new Promise<void>((r) => s.close(() => r()))));
  }

  async function closeAll(): Promise<void> {
    await Promise.all([...open.keys()].map(close));
  }

  return { serve, close, closeAll, serving: (dir: string) => open.has(dir) };
}

export type LoopbackBridges = ReturnType<typeof createLoopbackBridges>;

/**
 * Pipes one agent connection to the platform's port, both ways, half-closes included (as pasta's
 * forward does); an error on either side ends both.
 */
function forward(client: Socket, port: number) {
  const upstream = connect({ host: '127.0.0.1', port, allowHalfOpen: true, noDelay: true });
  const fail = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', fail).on('close', (hadError) => hadError && fail());
  upstream.on('error', fail).on('close', (hadError) => hadError && fail());
  client.pipe(upstream);
  upstream.pipe(client);
}

/** Whether a live process listens on the Unix socket `path` (a socket left by a process that died refuses). */
function answers(path: string): Promise<boolean> {
  try {
    if (!lstatSync(path).isSocket()) return Promise.resolve(false);
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
