/**
 * Builds the dashboard (dashboard/ → dashboard/dist) with Vite's JavaScript API.
 *
 *   npm run build:dashboard                       always build
 *   node scripts/build-dashboard.ts --if-stale    build only when its inputs changed since the build
 *                                                 dashboard/dist names (what `npm start` runs first)
 *
 * dashboard/dist is a link to a folder of its own per build, switched in one rename
 * (scripts/lib/switch-build.ts), so a platform starting while another start builds reads a whole
 * build, never a half-written one. A build's inputs are the files of dashboard/, the files outside
 * it that the build imported (src/config/limits.ts and the like: recorded from Vite's module graph)
 * and package-lock.json.
 *
 * Vite is a development dependency. On an install without them (`npm ci --omit=dev`) and without
 * a build, start-up goes on and the web app answers `/` with a page saying how to build.
 */
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { currentBuild, hashInputs, installBuild, listFiles, readRecord } from './lib/switch-build.ts';

export const DASHBOARD_ROOT = resolve(import.meta.dirname, '../dashboard');
const REPO = dirname(DASHBOARD_ROOT);
const LINK = join(DASHBOARD_ROOT, 'dist');
/** Folders of dashboard builds beside the dashboard/dist link (.gitignore). */
const PREFIX = '.dist-build-';

/** The hash of what a build is made from, given the files outside dashboard/ it imported. */
function inputsHash(imported: string[]): string {
  const own = listFiles(REPO, DASHBOARD_ROOT, (name) => name === 'node_modules' || name === 'dist' || name.startsWith(PREFIX));
  return hashInputs(REPO, [...own, ...imported, 'package-lock.json']);
}

const upToDate = (dir: string) => {
  const r = readRecord(dir);
  return r?.inputsHash !== undefined && inputsHash(r.inputs ?? []) === r.inputsHash;
};

export function dashboardIsStale(): boolean {
  const current = currentBuild(LINK, PREFIX);
  return current === undefined || !upToDate(current);
}

/** Builds into `outDir` (emptied first); returns the files outside dashboard/ and node_modules the build imported. */
export async function buildDashboard(outDir: string): Promise<{ imported: string[] }> {
  const { build } = await import('vite');
  let ids: string[] = [];
  // always React's production build: Vite and its React plugin keep an existing NODE_ENV (vitest sets
  // "test", a shell may have "development"), which ships React's development build and JSX runtime,
  // larger and slower, to every browser. Set for the build only, then put back.
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await build({
      configFile: join(DASHBOARD_ROOT, 'vite.config.ts'),
      logLevel: 'warn',
      build: { outDir, emptyOutDir: true },
      plugins: [
        {
          name: 'record-imported-files',
          buildEnd() {
            ids = [...this.getModuleIds()];
          },
        },
      ],
    });
  } finally {
    if (nodeEnv === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnv;
  }
  const imported = ids
    .map((id) => id.split('?')[0]!)
    .filter((id) => isAbsolute(id) && existsSync(id))
    .map((id) => relative(REPO, id))
    .filter((f) => !f.startsWith('..') && !f.split('/').includes('node_modules') && !f.startsWith('dashboard/'));
  return { imported: [...new Set(imported)].sort() };
}

/** Points dashboard/dist at an up-to-date build (`force`: a new one in any case). */
export async function installDashboard(force = false): Promise<{ dir: string; built: boolean }> {
  return installBuild({
    link: LINK,
    prefix: PREFIX,
    name: Date.now().toString(36),
    upToDate: (dir) => !force && upToDate(dir),
    build: async (dir) => {
      const { imported } = await buildDashboard(dir);
      return { inputs: imported, inputsHash: inputsHash(imported) };
    },
  });
}

if (import.meta.main) {
  if (process.argv.includes('--if-stale') && !dashboardIsStale()) process.exit(0);
  try {
    await import('vite');
  } catch {
    console.warn('dashboard: not built and Vite is not installed (npm install includes it): the web app will say so at /');
    process.exit(0);
  }
  const t = Date.now();
  const r = await installDashboard(!process.argv.includes('--if-stale'));
  if (r.built) console.log(`dashboard built in ${Date.now() - t} ms (dashboard/dist -> ${relative(DASHBOARD_ROOT, r.dir)})`);
}
