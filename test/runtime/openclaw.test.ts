/**
 * AGENT_RUNTIME=openclaw without OpenClaw installed: a clear error, no start attempt. Running the
 * real OpenClaw (~10 s and ~1 GB per agent) is `npm run test:openclaw` (test/openclaw/), not part
 * of `npm test`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HostingUnavailableError } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createLocalDriver } from '../../src/domains/agents/drivers/local/local.driver.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';

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
  it('says clearly that OpenClaw is not installed, and how to install it', async () => {
    const driver = createLocalDriver({ dataDir, runtime: 'openclaw', sandbox: testAgentSandbox() });
    await expect(driver.deploy(spec)).rejects.toBeInstanceOf(HostingUnavailableError);
    await expect(driver.deploy(spec)).rejects.toThrow(/npm run runtime:openclaw/);
  });
});
