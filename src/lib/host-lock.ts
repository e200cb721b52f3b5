/**
 * A lock between the processes of one machine, held while a Unix socket is bound. On Linux the
 * socket lives in the abstract namespace, which the kernel frees when its holder dies, so a
 * killed process never leaves a stale lock behind; elsewhere it is a socket file, taken over once
 * nobody accepts on it. Used around the embedded PostgreSQL server of a DATA_DIR and the builds
 * `npm start` makes in a checkout.
 */
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { platform } from 'node:os';

export type HostLock = { release(): Promise<void> };

/**
 * Waits until the lock `name` is free and takes it. `name` should be hard to guess where the
 * holders share a network namespace with less trusted processes (abstract sockets are per
 * network namespace, not per user). `fallbackPath`: the socket file where there is no abstract
 * namespace.
 */
export async function acquireHostLock(
  name: string,
  fallbackPath: string,
  options: { timeoutMs: number; onTimeout: () => Error },
): Promise<HostLock> {
  const address = platform() === 'linux' ? `\0${name}` : fallbackPath;
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const server = createServer();
    const err = await new Promise<NodeJS.ErrnoException | undefined>((done) => {
      server.once('error', done);
      server.listen(address, () => done(undefined));
    });
    if (!err) {
      server.unref();
      return { release: () => new Promise<void>((done) => server.close(() => done())) };
    }
    if (err.code !== 'EADDRINUSE') throw err;
    if (address === fallbackPath && !(await accepts(fallbackPath))) rmSync(fallbackPath, { force: true });
    if (Date.now() > deadline) throw options.onTimeout();
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Whether a process accepts on the socket file (its holder is alive). */
function accepts(path: string): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(path, () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
    setTimeout(() => {
      socket.destroy();
      done(true);
    }, 1_000).unref();
  });
}
