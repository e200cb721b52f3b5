/**
 * The driver settings of a local-driver test: the built-in runtime on `dataDir`, no hosting service,
 * in the sandbox where this machine has one (test/helpers/agent-sandbox.ts).
 */
import type { DriverConfig } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';

export const localDriverConfig = (dataDir: string, extra: Partial<DriverConfig> = {}): DriverConfig => ({
  HOSTING_DRIVER: 'local',
  DATA_DIR: dataDir,
  AGENT_RUNTIME: 'builtin',
  HOSTING_API_URL: 'http://127.0.0.1:9',
  HOSTING_API_KEY: undefined,
  HOSTING_OWNER_ID: undefined,
  AGENT_IMAGE: 'x',
  AGENT_SANDBOX: testAgentSandbox(),
  ...extra,
});
