/**
 * Root with the checkout inside a 0700 folder (root's home, `mktemp -d`): the server runs as the
 * `postgres` OS user, which cannot reach binaries or data there. The embedded server must still
 * start (binaries copied to a root-owned 0755 cache, the cluster kept outside DATA_DIR) without
 * changing the permissions of the operator's folders (src/db/embedded.ts).
 */
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { packagedNativeDir, startEmbeddedPostgres } from '../../src/db/embedded.ts';

const isRoot = process.getuid?.() === 0;

describe.skipIf(!isRoot)('embedded PostgreSQL as root inside a 0700 folder', () => {
  const home = mkdtempSync(join(tmpdir(), 'platform-0700-')); // mkdtemp makes it 0700
  const roots = mkdtempSync(join(tmpdir(), 'platform-roots-'));
  chmodSync(roots, 0o755);
  afterAll(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(roots, { recursive: true, force: true });
  });

  it('starts, serves queries and restarts on the same data, leaving the folder 0700', async () => {
    expect(statSync(home).mode & 0o777).toBe(0o700);
    // the binaries as a clone in that folder would have them: under node_modules in the 0700 folder
    const { nativeDir } = await packagedNativeDir();
    const nativeCopy = join(home, 'node_modules', 'native');
    cpSync(nativeDir, nativeCopy, { recursive: true, verbatimSymlinks: true });
    const dataDir = join(home, 'data');
    const opts = {
      dataDir,
      password: 'pw-0700',
      nativeDir: nativeCopy,
      cacheRoots: [join(roots, 'cache')],
      dataRoots: [join(roots, 'data')],
    };

    const first = await startEmbeddedPostgres(opts);
    try {
      expect(first.dataDir.startsWith(join(roots, 'data'))).toBe(true);
      expect(readFileSync(join(dataDir, 'pg.location'), 'utf8').trim()).toBe(first.dataDir);
      const c = new pg.Client({ connectionString: first.url });
      await c.connect();
      await c.query('CREATE TABLE kept (v text)');
      await c.query(`INSERT INTO kept VALUES ('still here')`);
      await c.end();
    } finally {
      await first.stop();
    }
    const second = await startEmbeddedPostgres(opts);
    try {
      expect(second.dataDir).toBe(first.dataDir);
      const c = new pg.Client({ connectionString: second.url });
      await c.connect();
      expect((await c.query('SELECT v FROM kept')).rows).toEqual([{ v: 'still here' }]);
      await c.end();
    } finally {
      await second.stop();
    }
    expect(statSync(home).mode & 0o777).toBe(0o700);
  }, 60_000);
});
