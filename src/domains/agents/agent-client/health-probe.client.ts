/**
 * §3 "Container health status" from the driver's view plus /healthz probes (§4.12): `healthy`
 * when the unit runs and its health endpoint answers, `starting` when it runs but the endpoint
 * stays silent after all retries; the other values (stopped, suspended, not_found, error) come
 * from the driver as they are. Probe numbers are §8's: 5 s per probe, every 2 s, 60 s overall.
 */
import { LIMITS } from '../../../config/limits.ts';
import type { ContainerStatus, HostingDriver } from '../drivers/driver.contract.ts';

export type ProbeOptions = { timeoutMs?: number; intervalMs?: number; probeTimeoutMs?: number; signal?: AbortSignal };

const healthzUrl = (url: string) => (url.replace(/\/+$/, '').endsWith('/healthz') ? url : `${url.replace(/\/+$/, '')}/healthz`);

/** One probe: true when `GET <url>/healthz` answers 200 with `{ok:true}` within `probeTimeoutMs`. */
export async function probeHealthz(url: string, probeTimeoutMs: number = LIMITS.healthProbeTimeoutMs): Promise<boolean> {
  try {
    const res = await fetch(healthzUrl(url), { signal: AbortSignal.timeout(probeTimeoutMs) });
    if (res.status !== 200) {
      await res.body?.cancel();
      return false;
    }
    const body = (await res.json().catch(() => undefined)) as { ok?: unknown } | undefined;
    return body?.ok === true;
  } catch {
    return false;
  }
}

/**
 * Polls `<url>/healthz` every `intervalMs` until it answers or `timeoutMs` passes (or `signal`
 * aborts). Resolves true when healthy, false on timeout; never throws for a silent agent.
 */
export async function waitForHealthy(url: string, options: ProbeOptions = {}): Promise<boolean> {
  const timeoutMs = options.timeoutMs ?? LIMITS.healthWaitTimeoutMs;
  const intervalMs = options.intervalMs ?? LIMITS.healthPollIntervalMs;
  const probeTimeoutMs = options.probeTimeoutMs ?? LIMITS.healthProbeTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (options.signal?.aborted) return false;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    const started = Date.now();
    if (await probeHealthz(url, Math.min(probeTimeoutMs, left))) return true;
    const wait = Math.min(intervalMs - (Date.now() - started), deadline - Date.now());
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    else if (Date.now() >= deadline) return false;
  }
}

/**
 * The §3 value for one agent. A unit the driver reports as live is probed `retries` times
 * (`intervalMs` apart): healthy if any probe answers, else `starting`.
 */
export async function containerHealth(
  driver: Pick<HostingDriver, 'status'>,
  agentId: string,
  options: { retries?: number; intervalMs?: number; probeTimeoutMs?: number } = {},
): Promise<{ status: ContainerStatus; url?: string }> {
  const current = await driver.status(agentId);
  if (current.status === 'healthy') return current;
  if ((current.status !== 'running' && current.status !== 'starting') || !current.url) return current;
  const retries = Math.max(1, options.retries ?? 3);
  const intervalMs = options.intervalMs ?? LIMITS.healthPollIntervalMs;
  for (let i = 0; i < retries; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, intervalMs));
    if (await probeHealthz(current.url, options.probeTimeoutMs ?? LIMITS.healthProbeTimeoutMs))
      return { status: 'healthy', url: current.url };
  }
  return { status: 'starting', url: current.url };
}
