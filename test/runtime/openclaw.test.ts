/**
 * AGENT_RUNTIME=openclaw: the local driver runs the real OpenClaw gateway. Skipped unless OpenClaw
 * is installed (scripts/install-openclaw.sh) in OPENCLAW_TEST_DATA_DIR, DATA_DIR or ./data.
 * It takes ~11 s to start and ~800 MB of memory.
 */
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitForHealthy } from '../../src/domains/agents/container-health.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local.driver.ts';
import { HostingUnavailableError } from '../../src/domains/agents/drivers/driver.ts';

const installedIn = resolve(process.env.OPENCLAW_TEST_DATA_DIR ?? process.env.DATA_DIR ?? 'data');
const installed = existsSync(join(installedIn, 'openclaw', 'node_modules', '.bin', 'openclaw'));
const dataDir = mkdtempSync(join(tmpdir(), 'openclaw-driver-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const spec = {
  agentId: 'oc1',
  userId: 'u1',
  plan: 'solo',
  gatewayToken: 'o'.repeat(48),
  platformApiKey: 'k',
  backendUrl: 'http://127.0.0.1:9',
  config: {},
};

describe('local driver with AGENT_RUNTIME=openclaw', () => {
  it('says clearly that OpenClaw is not installed', async () => {
    const driver = createLocalDriver({ dataDir, runtime: 'openclaw' });
    await expect(driver.deploy(spec)).rejects.toBeInstanceOf(HostingUnavailableError);
  });

  it.skipIf(!installed)('runs the OpenClaw gateway, which answers /healthz and requires the token', { timeout: 90_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'openclaw-real-'));
    symlinkSync(join(installedIn, 'openclaw'), join(dir, 'openclaw'));
    const driver = createLocalDriver({ dataDir: dir, runtime: 'openclaw' });
    try {
      const deployment = await driver.deploy(spec);
      expect(await waitForHealthy(deployment.url, { timeoutMs: 60_000, intervalMs: 500 })).toBe(true);
      expect(await (await fetch(`${deployment.url}/healthz`)).json()).toMatchObject({ ok: true, status: 'live' });
      expect((await driver.status('oc1')).status).toBe('healthy');
      expect((await driver.stats('oc1')).memory).toBeGreaterThan(50 * 1024 * 1024);
      await driver.delete('oc1');
      expect((await driver.status('oc1')).status).toBe('not_found');
    } finally {
      await driver.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
