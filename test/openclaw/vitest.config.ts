/**
 * `npm run test:openclaw` only: the real OpenClaw end to end (test/openclaw/*.e2e.ts). The default
 * configuration (vitest.config.ts, `npm test`) includes `*.test.ts` files only, so it never runs them.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/openclaw/**/*.e2e.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
