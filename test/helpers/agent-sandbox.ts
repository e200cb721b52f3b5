/**
 * AGENT_SANDBOX for tests that run agents on the local driver but test something other than the
 * sandbox: `auto` where bubblewrap builds a sandbox on this machine (the agents then run in it, as in
 * production), else `off`, said explicitly: `auto` refuses agents where no sandbox works
 * (docs/agents.md "Sandbox"), and a CI machine may lack bubblewrap. The sandbox's own tests
 * (test/drivers/sandbox.test.ts, sandbox-refusal.test.ts) use `auto` and `off` as they mean them.
 * Asked when a test starts its driver, not when this module loads, so a test that changes PATH first
 * (test/fixtures/broken-bwrap.ts) is probed with it.
 */
import { detectSandbox } from '../../src/domains/agents/drivers/local/containment/sandbox.service.ts';

export const testAgentSandbox = (): 'auto' | 'off' => (detectSandbox('auto').active ? 'auto' : 'off');
