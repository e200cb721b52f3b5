/**
 * The runtime's counters (messages, response time, bytes in and out of its sockets), written as
 * JSON to a stats file the local driver's stats() reads (atomically: write, then rename). Flushed
 * every second while anything changed or a socket is open, and on close.
 */
import type { Socket } from 'node:net';
import type { RuntimeLogger } from './runtime-log.ts';

// not `import … from 'node:fs'`: building that module's namespace loads fs/promises and more (~3 MB an idle agent keeps)
const { renameSync, writeFileSync } = process.getBuiltinModule('node:fs');

export type RuntimeStats = {
  agentId: string;
  startedAt: string;
  messagesProcessed: number;
  messagesFailed: number;
  averageResponseTimeMs: number;
  network: { rxBytes: number; txBytes: number };
  updatedAt: string;
};

export function createRuntimeStats(options: {
  agentId: string;
  startedAt: number;
  statsFile?: string | undefined;
  logger: RuntimeLogger;
  onTick?: () => void;
}) {
  const { startedAt } = options;
  const counters = { processed: 0, failed: 0, totalMs: 0, rx: 0, tx: 0 };
  const openSockets = new Set<Socket>();
  let dirty = true;

  const stats = (): RuntimeStats => {
    let rx = counters.rx;
    let tx = counters.tx;
    for (const s of openSockets) {
      rx += s.bytesRead;
      tx += s.bytesWritten;
    }
    return {
      agentId: options.agentId,
      startedAt: new Date(startedAt).toISOString(),
      messagesProcessed: counters.processed,
      messagesFailed: counters.failed,
      averageResponseTimeMs: counters.processed ? Math.round(counters.totalMs / counters.processed) : 0,
      network: { rxBytes: rx, txBytes: tx },
      updatedAt: new Date().toISOString(),
    };
  };
  const flushStats = () => {
    if (!options.statsFile) return;
    try {
      const tmp = `${options.statsFile}.tmp`;
      writeFileSync(tmp, JSON.stringify(stats()));
      renameSync(tmp, options.statsFile);
      dirty = false;
    } catch (err) {
      options.logger.warn({ err }, 'could not write the stats file');
    }
  };
  const record = (ok: boolean, ms: number) => {
    if (ok) {
      counters.processed += 1;
      counters.totalMs += ms;
    } else counters.failed += 1;
    dirty = true;
  };
  const statsTimer = setInterval(() => {
    if (dirty || openSockets.size > 0) flushStats();
    options.onTick?.();
  }, 1_000);
  statsTimer.unref();

  /** Counts a connection's bytes while it is open and after it closes. */
  const track = (socket: Socket) => {
    openSockets.add(socket);
    socket.on('close', () => {
      openSockets.delete(socket);
      counters.rx += socket.bytesRead;
      counters.tx += socket.bytesWritten;
      dirty = true;
    });
  };
  const close = () => {
    clearInterval(statsTimer);
    flushStats();
  };
  /** Bytes the runtime received from its model provider (counted with the sockets' own). */
  const received = (bytes: number) => {
    counters.rx += bytes;
    dirty = true;
  };
  return { stats, flushStats, record, track, received, close };
}
