import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/**
 * Two groups (docs/architecture.md "Tests"). Files that hold what the host has one of — agents
 * under the local driver (their uids, cgroups and sandbox), a whole platform started as `npm start`
 * does (its ports, its DATA_DIR), Chromium — run one at a time, after the others.
 * Every other file works in a database of its own (cloned from the run's template), so those run
 * side by side: on a 2-core machine vitest's default is one worker, and most of their time is spent
 * waiting on PostgreSQL. They also share their worker's process (isolate: false): each file used to
 * load the whole platform's modules afresh, two thirds of their CPU time; the one-at-a-time
 * files keep a process each, since what they hold (the sandbox probe, PATH, child processes) is
 * process-wide. What puts a file in the one-at-a-time group is read from the
 * file itself (SERIAL_MARKERS), so a new test that starts agents lands there without a list to keep.
 */
const SERIAL_MARKERS =
  /createLocalDriver|createHostingDriver|localDriverConfig|drivers\/local\/|startLivePlatform|testAgentSandbox|HOSTING_DRIVER: 'local'|main\.ts|dist\/main|chromium|startBrowser/;
/** folders whose files all start platforms or browsers */
const SERIAL_FOLDERS = ['test/start/', 'test/dashboard/', 'test/e2e/'];
/** the drivers' and runtimes' tests that start processes of their own (sandboxes, runtimes) */
const PROCESS_FOLDERS = /^test\/(drivers|runtime)\//;
const STARTS_PROCESSES = /spawn\(|spawnSync\(|execFile/;

const testFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
    .map((e) => join(e.parentPath, e.name));

const serial = [...testFiles('test'), ...testFiles('src')].filter((f) => {
  const text = readFileSync(f, 'utf8');
  return (
    SERIAL_FOLDERS.some((d) => f.startsWith(d)) || SERIAL_MARKERS.test(text) || (PROCESS_FOLDERS.test(f) && STARTS_PROCESSES.test(text))
  );
});

const shared = {
  globalSetup: ['test/global-setup.ts'],
  pool: 'forks' as const,
  testTimeout: 30_000,
  hookTimeout: 90_000,
};

export default defineConfig({
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    projects: [
      {
        test: {
          ...shared,
          name: 'parallel',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: serial,
          // TEST_WORKERS: how many of these files at once (default 3: they mostly wait on PostgreSQL)
          maxWorkers: Number(process.env.TEST_WORKERS ?? 3),
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: 'serial',
          include: serial,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
