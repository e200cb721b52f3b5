/**
 * Builds the dashboard (dashboard/ → dashboard/dist) with Vite's JavaScript API.
 *
 *   npm run build:dashboard            always build
 *   node scripts/build-dashboard.ts --if-stale   build only when dist/ is missing or older than a
 *                                      source file (what `npm start` runs first, in prestart)
 *
 * Vite is a development dependency. On an install without them (`npm ci --omit=dev`) and without
 * a build, start-up goes on and the web app answers `/` with a page saying how to build.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const DASHBOARD_ROOT = resolve(import.meta.dirname, '../dashboard');

function newestSource(dir = DASHBOARD_ROOT): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    if (name === 'dist' || name === 'node_modules') continue;
    const full = join(dir, name);
    const st = statSync(full);
    newest = Math.max(newest, st.isDirectory() ? newestSource(full) : st.mtimeMs);
  }
  return newest;
}

export function dashboardIsStale(outDir = join(DASHBOARD_ROOT, 'dist')): boolean {
  const index = join(outDir, 'index.html');
  return !existsSync(index) || statSync(index).mtimeMs < newestSource();
}

export async function buildDashboard(outDir = join(DASHBOARD_ROOT, 'dist')): Promise<void> {
  const { build } = await import('vite');
  await build({ configFile: join(DASHBOARD_ROOT, 'vite.config.ts'), logLevel: 'warn', build: { outDir, emptyOutDir: true } });
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
  await buildDashboard();
  console.log(`dashboard built in ${Date.now() - t} ms (dashboard/dist)`);
}
