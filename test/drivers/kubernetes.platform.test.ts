/**
 * The kubernetes driver inside the platform (backend routes, deployment worker, PostgreSQL)
 * against the fake Kubernetes API: a deploy whose Service is refused by the API server is retried
 * by the job and ends with one set of objects and a running agent, and an API server that is down
 * answers callers the §4.7 `Hosting unavailable` body, never the cluster's own error.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostingDriver } from '../../src/domains/agents/drivers/driver.contract.ts';
import { createKubernetesDriver } from '../../src/domains/agents/drivers/kubernetes/kubernetes.driver.ts';
import { type AgentsTestPlatform, deployThroughOneFailure, startAgentsPlatform } from '../agents/helpers.ts';
import { type FakeKubernetesApi, startFakeKubernetesApi } from '../fakes/kubernetes-api.ts';
import { signUp } from '../helpers/platform.ts';

let k8s: FakeKubernetesApi;
let dir: string;
let t: AgentsTestPlatform<HostingDriver>;

beforeAll(async () => {
  k8s = await startFakeKubernetesApi({ readyMs: 100 });
  dir = mkdtempSync(join(tmpdir(), 'k8s-platform-'));
  writeFileSync(join(dir, 'kubeconfig'), k8s.kubeconfig('agents'));
  const driver = createKubernetesDriver({
    kubeconfig: join(dir, 'kubeconfig'),
    namespace: 'agents',
    image: 'ghcr.io/example/agent:1',
    serviceUrl: (svc, ns) => `${k8s.origin}/svc/${ns}/${svc}`,
    timeoutMs: 2_000,
  });
  t = await startAgentsPlatform<HostingDriver>({ driver, env: { CONTAINER_HEALTH_RETRIES: '1', CONTAINER_HEALTH_INTERVAL_MS: '50' } });
  await t.platform.watchdogWorker?.stop();
}, 60_000);
afterAll(async () => {
  await t?.close();
  await k8s?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kubernetes driver in the platform', () => {
  it('a half-way refusal is retried by the deploy job into one set of objects; a down API answers Hosting unavailable', async () => {
    const user = await signUp(t.web);
    k8s.fail({ method: 'POST', resource: 'services', status: 500 });
    // the first attempt failed on the Service and was queued again with a message naming only the call
    const { agent, headers, firstError, attempts } = await deployThroughOneFailure(t, user.id, 'K');
    expect(firstError).toBe('Kubernetes API create Service answered 500');
    expect(attempts).toBe(2);
    const a = (await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}`, headers })).json();
    expect(a).toMatchObject({ status: 'running', gatewayUrl: `${k8s.origin}/svc/agents/agent-${agent.id}` });
    // the backend's default plan, label, runs at §4.7 scale size
    const [d] = [...k8s.store.deployments.values()];
    expect(d!.spec.template.spec.containers[0].resources.limits).toEqual({ cpu: '4', memory: '8192Mi', 'ephemeral-storage': '4Gi' });
    expect([k8s.store.secrets.size, k8s.store.services.size, k8s.store.deployments.size]).toEqual([1, 1, 1]);
    expect(k8s.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/deployments'))).toHaveLength(1);

    const health = await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}/health`, headers });
    expect(health.json()).toMatchObject({ status: 'healthy' });
    const logs = await t.backend.inject({ method: 'GET', url: `/api/agents/${agent.id}/logs?limit=5`, headers });
    expect(logs.statusCode).toBe(200);
    expect(logs.json().logs.map((l: { message: string }) => l.message)).toContain('gateway listening on 18789');

    k8s.down = true;
    try {
      for (const url of [`/api/agents/${agent.id}/logs`, `/api/agents/${agent.id}/stats`, `/api/agents/${agent.id}/health`]) {
        const r = await t.backend.inject({ method: 'GET', url, headers });
        expect(r.statusCode).toBe(500);
        expect(r.json()).toEqual({ error: 'Hosting unavailable', code: 'HOSTING_UNAVAILABLE' });
      }
    } finally {
      k8s.down = false;
    }
    // stop scales the Deployment to 0 (the driver's stop); the cluster says so
    const stop = await t.backend.inject({ method: 'POST', url: `/api/agents/${agent.id}/stop`, headers });
    expect(stop.statusCode).toBe(200);
    expect((await t.driver.status(agent.id)).status).toBe('stopped');
  }, 40_000);
});
