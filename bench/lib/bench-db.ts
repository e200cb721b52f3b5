/**
 * What the platform benches share: a migrated embedded PostgreSQL in a temporary folder (as
 * `npm start` runs it), and stopping the upstream process of the AI benches.
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';

export type BenchDatabase = { dir: string; url: string; stop(): Promise<void> };

export async function startBenchDatabase(prefix: string): Promise<BenchDatabase> {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(dir, 0o755); // the server runs as the `postgres` OS user when we are root
  try {
    const embedded = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), password: 'bench' });
    await migrate(embedded.url);
    return {
      dir,
      url: embedded.url,
      async stop() {
        await embedded.stop().catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

export function stopProcess(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill();
  });
}
