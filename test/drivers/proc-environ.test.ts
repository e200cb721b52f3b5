/**
 * readEnviron (src/domains/agents/drivers/local/containment/proc.service.ts) reads an environment a process wrote itself:
 * every name, `__proto__` included, is an own key of an object without a prototype, and a name the
 * process did not set is absent rather than inherited.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentProcesses, readEnviron } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';

let child: ReturnType<typeof spawn>;
beforeAll(async () => {
  // `env -i` sets exactly these names, `__proto__` and `constructor` among them
  child = spawn('env', ['-i', '__proto__=polluted', 'constructor=x', 'AGENT_ID=proc-environ-test', 'sleep', '30'], { stdio: 'ignore' });
  await once(child, 'spawn');
  // env execs sleep in place: wait until /proc shows sleep's environment
  for (let i = 0; i < 100 && readEnviron(child.pid!)?.AGENT_ID !== 'proc-environ-test'; i++) await new Promise((r) => setTimeout(r, 20));
});
afterAll(() => {
  child.kill();
});

describe('readEnviron', () => {
  it('reads every name as an own key of a prototype-less object', () => {
    const env = readEnviron(child.pid!)!;
    expect(Object.getPrototypeOf(env)).toBeNull();
    expect(Object.keys(env).sort()).toEqual(['AGENT_ID', '__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(env, '__proto__')?.value).toBe('polluted');
    expect(env.toString).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('finds the process by the agent id it names', () => {
    expect(agentProcesses('proc-environ-test')).toEqual([child.pid]);
  });
});
