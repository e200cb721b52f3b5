/**
 * What the fault bench (bench/faults.ts) looks at besides the load: a probe that sends one request
 * every `everyMs` and records status, time and whether the body is a JSON error; Redis's key count
 * over its own protocol; the agent runtime processes of one agent (by the AGENT_ID in their
 * environment); the deployment rows of one agent.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import pg from 'pg';

export type ProbeResult = { t: number; status: number | 'ERR' | 'TIMEOUT'; ms: number; jsonError: boolean };

export type Probe = { results: ProbeResult[]; stop(): Promise<void> };

/** Sends `init` to `url` every `everyMs` (one at a time), each bounded by `timeoutMs`. */
export function startProbe(url: string, init: RequestInit, everyMs = 250, timeoutMs = 10_000): Probe {
  const results: ProbeResult[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const t = Date.now();
      const t0 = performance.now();
      let status: ProbeResult['status'];
      let jsonError = false;
      try {
        const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
        const text = await res.text();
        status = res.status;
        try {
          jsonError = typeof (JSON.parse(text) as { error?: unknown }).error !== 'undefined';
        } catch {
          jsonError = false;
        }
      } catch (err) {
        status = (err as Error).name === 'TimeoutError' ? 'TIMEOUT' : 'ERR';
      }
      results.push({ t, status, ms: Math.round(performance.now() - t0), jsonError });
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    results,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** One Redis command over RESP; the reply line, or undefined when Redis does not answer. */
export function redisCommand(url: string, ...args: string[]): Promise<string | undefined> {
  const u = new URL(url);
  const payload = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  return new Promise((resolve) => {
    const s = createConnection({ host: u.hostname, port: Number(u.port) });
    s.setTimeout(1000);
    s.on('connect', () => s.write(payload));
    s.on('data', (d) => {
      s.destroy();
      resolve(d.toString().split('\r\n')[0]);
    });
    s.on('error', () => resolve(undefined));
    s.on('timeout', () => {
      s.destroy();
      resolve(undefined);
    });
  });
}

/** Pids of the runtime processes (not bwrap, not the network helper) whose environment names the agent. */
export function agentProcesses(agentId: string): number[] {
  const out: number[] = [];
  const needle = `\0AGENT_ID=${agentId}\0`;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (comm === 'bwrap' || comm === 'pasta' || comm === 'pasta.avx2') continue;
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0];
      if (state === 'Z') continue;
      const env = `\0${readFileSync(`/proc/${name}/environ`, 'latin1')}`;
      if (env.includes(needle)) out.push(Number(name));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return out;
}

export type DeploymentRow = { id: string; status: string; attempts: number; locked_by: string | null; last_error: string | null };

export async function deploymentsOf(superuserUrl: string, agentId: string): Promise<DeploymentRow[]> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const r = await client.query<DeploymentRow>(
      'SELECT id::text, status, attempts, locked_by, last_error FROM deployments WHERE agent_id = $1 ORDER BY created_at',
      [agentId],
    );
    return r.rows;
  } finally {
    await client.end();
  }
}

/** Polls until `agentId` has a deployment `running` (taken by a worker); its row. */
export async function waitDeploymentRunning(superuserUrl: string, agentId: string, timeoutMs: number): Promise<DeploymentRow> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await client.query<DeploymentRow>(
        `SELECT id::text, status, attempts, locked_by, last_error FROM deployments WHERE agent_id = $1 AND status = 'running'`,
        [agentId],
      );
      if (r.rows[0]) return r.rows[0];
      if (Date.now() > deadline) throw new Error(`no deployment of ${agentId} was taken within ${timeoutMs} ms`);
      await new Promise((res) => setTimeout(res, 5));
    }
  } finally {
    await client.end();
  }
}

/** The first probe time at or after `from` from which every probe answered `ok` until the end. */
export function recoveredAt(results: ProbeResult[], from: number, ok: (r: ProbeResult) => boolean): number | undefined {
  let at: number | undefined;
  for (const r of results) {
    if (r.t < from) continue;
    if (ok(r)) at ??= r.t;
    else at = undefined;
  }
  return at;
}
