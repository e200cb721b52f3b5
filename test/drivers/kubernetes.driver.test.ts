/**
 * The kubernetes driver against a local fake of the Kubernetes API (test/fakes/kubernetes-api.ts)
 * reached through a kubeconfig file, so the real @kubernetes/client-node code runs: the objects it
 * makes (labels, pod security, §4.7 resources, what the Secret holds), idempotent deploys, the
 * lifecycle, logs, stats, readiness, and an API server that is down, slow or refuses half-way.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Deployment, V1DeploymentStatus } from '@kubernetes/client-node';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForHealthy } from '../../src/domains/agents/agent-client/health-probe.client.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type HostingDriver,
  HostingUnavailableError,
} from '../../src/domains/agents/drivers/driver.contract.ts';
import { createHostingDriver, type DriverConfig } from '../../src/domains/agents/drivers/driver-registry.service.ts';
import { loadKubeConfig } from '../../src/domains/agents/drivers/kubernetes/kubernetes.client.ts';
import { createKubernetesDriver, type KubernetesDriverOptions } from '../../src/domains/agents/drivers/kubernetes/kubernetes.driver.ts';
import { objectName } from '../../src/domains/agents/drivers/kubernetes/kubernetes-objects.rules.ts';
import { deploymentStatus, parsePodLog, parseQuantity } from '../../src/domains/agents/drivers/kubernetes/kubernetes-observe.service.ts';
import { type FakeKubernetesApi, startFakeKubernetesApi } from '../fakes/kubernetes-api.ts';

const NS = 'agents';
const TOKEN = 'g'.repeat(48);
let k8s: FakeKubernetesApi;
let dir: string;
let kubeconfig: string;
let driver: HostingDriver;

const driverWith = (over: Partial<KubernetesDriverOptions> = {}) =>
  createKubernetesDriver({
    kubeconfig,
    namespace: NS,
    image: 'ghcr.io/example/agent:1',
    serviceUrl: (svc, ns) => `${k8s.origin}/svc/${ns}/${svc}`,
    timeoutMs: 2_000,
    ...over,
  });

const spec = (over: Partial<AgentDeploySpec> = {}): AgentDeploySpec => ({
  agentId: 'k1',
  userId: 'user-1',
  plan: 'collective',
  gatewayToken: TOKEN,
  platformApiKey: 'apk_scoped_1',
  backendUrl: 'https://backend.example',
  config: { logging: { level: 'info' } },
  env: {
    AGENT_MODEL_BASE_URL: 'https://backend.example/api/agent-gateway/v1',
    AGENT_MODEL_API_KEY: 'apk_scoped_1',
    DATABASE_URL: 'postgres://platform:secret@db/platform',
    INTERNAL_API_KEY: 'internal-master-key',
    WALLET_ENCRYPTION_KEY: 'wallet-master-key',
  },
  ...over,
});

const objectsOf = (agentId: string) => {
  const key = `${NS}/${objectName(agentId)}`;
  return { secret: k8s.store.secrets.get(key), service: k8s.store.services.get(key), deployment: k8s.store.deployments.get(key) };
};
const counts = () => ({ secrets: k8s.store.secrets.size, services: k8s.store.services.size, deployments: k8s.store.deployments.size });
const decoded = (secret: Record<string, any> | undefined) =>
  Object.fromEntries(
    Object.entries((secret?.data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
  );
const eventually = async (check: () => Promise<boolean>, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
};

beforeAll(async () => {
  k8s = await startFakeKubernetesApi({ readyMs: 150 });
  dir = mkdtempSync(join(tmpdir(), 'k8s-driver-'));
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, k8s.kubeconfig(NS));
  driver = driverWith();
});
afterAll(async () => {
  await k8s?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kubernetes driver: objects', () => {
  it('creates a labelled Secret, Service and locked-down Deployment sized by the §4.7 plan', async () => {
    const deployment = await driver.deploy(spec());
    expect(deployment).toEqual({ externalId: `${NS}/agent-k1`, url: `${k8s.origin}/svc/${NS}/agent-k1`, status: 'starting' });
    const { secret, service, deployment: d } = objectsOf('k1');
    for (const o of [secret, service, d]) {
      expect(o?.metadata.name).toBe('agent-k1');
      expect(o?.metadata.labels).toMatchObject({ 'agent-platform/agent-id': 'k1', 'app.kubernetes.io/managed-by': 'agent-platform' });
      expect(o?.metadata.annotations['agent-platform/spec-hash']).toMatch(/^[0-9a-f]{64}$/);
    }
    // each validates against the Kubernetes schemas
    new Secret(secret as never).validate();
    new Service(service as never).validate();
    new Deployment(d as never).validate();

    expect(service!.spec).toMatchObject({
      type: 'ClusterIP',
      selector: { 'agent-platform/agent-id': 'k1' },
      ports: [{ port: 18789, targetPort: 18789 }],
    });
    expect(d!.spec.replicas).toBe(1);
    const pod = d!.spec.template.spec;
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    const [c] = pod.containers;
    expect(c.image).toBe('ghcr.io/example/agent:1');
    expect(c.securityContext).toMatchObject({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    // collective → pro; and a bound on the node's disk (its emptyDirs, logs and writable layer)
    const sized = { cpu: '2', memory: '4096Mi', 'ephemeral-storage': '4Gi' };
    expect(c.resources).toEqual({ requests: sized, limits: sized });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 18789 });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 18789 });
    expect(c.envFrom).toEqual([{ secretRef: { name: 'agent-k1' } }]);
    // the writable places are the pod's own emptyDirs, each with a size limit: one agent cannot fill the node's disk
    expect(c.volumeMounts.map((m: { mountPath: string }) => m.mountPath).sort()).toEqual(['/home/node', '/tmp']);
    expect(pod.volumes).toEqual([
      { name: 'home', emptyDir: { sizeLimit: '2Gi' } },
      { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
    ]);
    // the container's limit holds both volumes (and its logs)
    const gib = (q: string) => Number(q.replace(/Gi$/, ''));
    expect(gib(c.resources.limits['ephemeral-storage'])).toBeGreaterThan(
      pod.volumes.reduce((sum: number, v: { emptyDir: { sizeLimit: string } }) => sum + gib(v.emptyDir.sizeLimit), 0),
    );
    const env = Object.fromEntries(c.env.map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(env).toMatchObject({ AGENT_ID: 'k1', AGENT_PLAN: 'collective', AGENT_PORT: '18789', AGENT_HOST: '0.0.0.0', HOME: '/home/node' });

    // the Secret holds the agent's own credentials; no platform secret anywhere in what was sent
    const data = decoded(secret);
    expect(data).toMatchObject({
      AGENT_GATEWAY_TOKEN: TOKEN,
      OPENCLAW_GATEWAY_TOKEN: TOKEN,
      AGENT_PLATFORM_API_KEY: 'apk_scoped_1',
      AGENT_MODEL_BASE_URL: 'https://backend.example/api/agent-gateway/v1',
      AGENT_MODEL_API_KEY: 'apk_scoped_1',
    });
    expect(JSON.parse(data.AGENT_CONFIG_JSON!)).toEqual({ logging: { level: 'info' } });
    const everything = JSON.stringify([secret, service, d, data]);
    for (const leaked of [
      'DATABASE_URL',
      'INTERNAL_API_KEY',
      'WALLET_ENCRYPTION_KEY',
      'internal-master-key',
      'wallet-master-key',
      'postgres://',
    ]) {
      expect(everything).not.toContain(leaked);
    }
    // the gateway token and platform key are not in the Deployment (readable by whoever may list Deployments)
    expect(JSON.stringify(d)).not.toContain(TOKEN);
    expect(JSON.stringify(d)).not.toContain('apk_scoped_1');
  });

  it('reports starting until a replica is ready, then running at the Service URL', async () => {
    const first = await driver.status('k1');
    expect(['starting', 'running']).toContain(first.status);
    await eventually(async () => (await driver.status('k1')).status === 'running');
    expect(await driver.status('k1')).toEqual({ status: 'running', url: `${k8s.origin}/svc/${NS}/agent-k1` });
    expect(await waitForHealthy(`${k8s.origin}/svc/${NS}/agent-k1`, { timeoutMs: 2_000, intervalMs: 50 })).toBe(true);
    expect(await driver.status('nobody')).toEqual({ status: 'not_found' });
  });

  it('deploy is idempotent: the same spec adopts without a write, a changed one replaces in place', async () => {
    const podBefore = k8s.podsOf('k1').map((p) => p.metadata.name);
    const writesBefore = k8s.requests.filter((r) => r.method !== 'GET').length;
    expect(await driver.deploy(spec())).toEqual({
      externalId: `${NS}/agent-k1`,
      url: `${k8s.origin}/svc/${NS}/agent-k1`,
      status: 'running',
    });
    expect(k8s.requests.filter((r) => r.method !== 'GET').length).toBe(writesBefore);
    expect(k8s.podsOf('k1').map((p) => p.metadata.name)).toEqual(podBefore);

    const clusterIP = objectsOf('k1').service!.spec.clusterIP;
    const rotated = await driver.deploy(spec({ platformApiKey: 'apk_scoped_2' }));
    expect(rotated.status).toBe('starting');
    expect(counts()).toEqual({ secrets: 1, services: 1, deployments: 1 });
    expect(decoded(objectsOf('k1').secret).AGENT_PLATFORM_API_KEY).toBe('apk_scoped_2');
    expect(objectsOf('k1').service!.spec.clusterIP).toBe(clusterIP);
    // the pod template carries the spec hash, so the pods are replaced and pick up the new Secret
    await eventually(async () => (await driver.status('k1')).status === 'running');
    expect(k8s.podsOf('k1').map((p) => p.metadata.name)).not.toEqual(podBefore);
    expect(k8s.podsOf('k1')).toHaveLength(1);
  });

  it('restart, stop, suspend, resume and delete act on replicas and the pod template', async () => {
    const before = k8s.podsOf('k1')[0]!.metadata.name;
    await driver.restart('k1');
    expect(objectsOf('k1').deployment!.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toMatch(/^\d{4}-/);
    expect(k8s.podsOf('k1').map((p) => p.metadata.name)).not.toContain(before);
    await eventually(async () => (await driver.status('k1')).status === 'running');

    await driver.stop!('k1');
    expect(k8s.requests.some((r) => r.path.endsWith('/deployments/agent-k1/scale') && r.method === 'PATCH')).toBe(true);
    expect((await driver.status('k1')).status).toBe('stopped');
    expect(k8s.podsOf('k1')).toHaveLength(0);
    await driver.restart('k1'); // from 0: scaled back up, as the watchdog's repair expects
    expect(objectsOf('k1').deployment!.spec.replicas).toBe(1);
    await eventually(async () => (await driver.status('k1')).status === 'running');

    await driver.suspend('k1');
    expect((await driver.status('k1')).status).toBe('suspended');
    await driver.resume('k1');
    expect(objectsOf('k1').deployment!.metadata.annotations['agent-platform/suspended']).toBeUndefined();
    await eventually(async () => (await driver.status('k1')).status === 'running');

    // every patch went out as a merge patch (the fake answers 415 to any other type)
    expect(
      k8s.requests.filter((r) => r.method === 'PATCH').every((r) => r.contentType === 'application/merge-patch+json' && r.status === 200),
    ).toBe(true);
  });

  it('logs come from the agent pod (tailLines, timestamps, levels); stats from PodMetrics, or zeros without the API', async () => {
    const pod = k8s.podsOf('k1')[0]!;
    pod.log.push('2026-01-02T03:04:05.123456789Z {"level":50,"time":1,"msg":"model call failed"}');
    const logs = await driver.logs('k1', { limit: 10 });
    expect(logs.map((l) => [l.level, l.message])).toEqual([
      ['info', 'gateway listening on 18789'],
      ['warn', 'WARN model base URL answered slowly'],
      ['error', 'model call failed'],
    ]);
    expect(logs[2]).toMatchObject({ timestamp: '2026-01-02T03:04:05.123Z', source: 'container' });
    expect(logs[0]!.source).toBe('runtime');
    expect((await driver.logs('k1', { limit: 1 })).map((l) => l.message)).toEqual(['model call failed']);
    expect(k8s.requests.at(-1)!.path).toBe(`/api/v1/namespaces/${NS}/pods/${pod.metadata.name}/log`);
    expect((await driver.logs('k1', { limit: 5, level: 'warn' })).map((l) => l.level)).toEqual(['warn']);
    expect(await driver.logs('nobody', { limit: 5 })).toEqual([]);

    const started = Date.parse(k8s.podsOf('k1')[0]!.status?.startTime ?? '') || k8s.podsOf('k1')[0]!.readyAt;
    const timed = driverWith({ now: () => new Date(started + 90_000) });
    const stats = await timed.stats('k1');
    expect(stats).toMatchObject({ status: 'running', cpu: 25, memory: 512 * 1024 * 1024, memoryPercent: 12.5, pids: 0 });
    expect(stats.uptime).toBeGreaterThanOrEqual(89);
    expect(stats.uptime).toBeLessThanOrEqual(90);
    k8s.metricsAvailable = false;
    try {
      expect(await driver.stats('k1')).toMatchObject({ status: 'running', cpu: 0, memory: 0, memoryPercent: 0 });
    } finally {
      k8s.metricsAvailable = true;
    }
    expect((await driver.stats('nobody')).status).toBe('not_found');
  });

  it('delete removes all three objects and succeeds when they are already gone', async () => {
    await driver.delete('k1');
    expect(counts()).toEqual({ secrets: 0, services: 0, deployments: 0 });
    expect(k8s.podsOf('k1')).toHaveLength(0);
    expect(await driver.status('k1')).toEqual({ status: 'not_found' });
    await expect(driver.delete('k1')).resolves.toBeUndefined();
    await expect(driver.restart('k1')).rejects.toBeInstanceOf(AgentNotDeployedError);
    await expect(driver.suspend('k1')).rejects.toBeInstanceOf(AgentNotDeployedError);
  });
});

describe('kubernetes driver: faults', () => {
  it('an API server that refuses half-way throws HostingUnavailableError; the retry converges to one set', async () => {
    k8s.fail({ method: 'POST', resource: 'services', status: 500 });
    const err = await driver.deploy(spec({ agentId: 'k2' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostingUnavailableError);
    expect((err as Error).message).not.toContain('etcdserver'); // the server's own text never travels on
    expect(objectsOf('k2').secret).toBeDefined();
    expect(objectsOf('k2').service).toBeUndefined();
    expect(objectsOf('k2').deployment).toBeUndefined();
    // the job's retry runs with a fresh platform key: the Secret is replaced, the rest created
    await driver.deploy(spec({ agentId: 'k2', platformApiKey: 'apk_retry' }));
    expect(counts()).toEqual({ secrets: 1, services: 1, deployments: 1 });
    expect(decoded(objectsOf('k2').secret).AGENT_PLATFORM_API_KEY).toBe('apk_retry');

    // the Deployment made but its answer lost (a 504 after the write): the retry adopts it
    await driver.delete('k2');
    k8s.fail({ method: 'POST', resource: 'deployments', status: 504, commit: true });
    await expect(driver.deploy(spec({ agentId: 'k2' }))).rejects.toBeInstanceOf(HostingUnavailableError);
    expect(counts()).toEqual({ secrets: 1, services: 1, deployments: 1 });
    const writes = k8s.requests.length;
    await driver.deploy(spec({ agentId: 'k2' }));
    expect(k8s.requests.slice(writes).filter((r) => r.method !== 'GET')).toEqual([]);

    // a stale read (404 for an object that exists) makes the create answer 409: read again and adopt
    k8s.fail({ method: 'GET', resource: 'secrets', status: 404 });
    await driver.deploy(spec({ agentId: 'k2' }));
    expect(k8s.requests.some((r) => r.method === 'POST' && r.path.endsWith('/secrets') && r.status === 409)).toBe(true);
    expect(counts()).toEqual({ secrets: 1, services: 1, deployments: 1 });

    // two deploys at once (two backends) end with one set too
    await driver.delete('k2');
    await Promise.all([driver.deploy(spec({ agentId: 'k2' })), driver.deploy(spec({ agentId: 'k2' }))]);
    expect(counts()).toEqual({ secrets: 1, services: 1, deployments: 1 });
    await driver.delete('k2');
  });

  it('down, slow, 5xx or refusing the credentials: HostingUnavailableError on every call', async () => {
    k8s.down = true;
    try {
      await expect(driver.deploy(spec({ agentId: 'k3' }))).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.status('k3')).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.delete('k3')).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.logs('k3', { limit: 5 })).rejects.toBeInstanceOf(HostingUnavailableError);
      await expect(driver.stats('k3')).rejects.toBeInstanceOf(HostingUnavailableError);
    } finally {
      k8s.down = false;
    }
    k8s.fail({ method: 'GET', resource: 'deployments', status: 'hang' });
    await expect(driverWith({ timeoutMs: 200 }).status('k3')).rejects.toBeInstanceOf(HostingUnavailableError);
    k8s.fail({ method: 'GET', resource: 'deployments', status: 503 });
    await expect(driver.status('k3')).rejects.toBeInstanceOf(HostingUnavailableError);

    const badToken = join(dir, 'bad-token');
    writeFileSync(badToken, k8s.kubeconfig(NS).replace(k8s.token, 'not-the-token'));
    await expect(driverWith({ kubeconfig: badToken }).deploy(spec({ agentId: 'k3' }))).rejects.toBeInstanceOf(HostingUnavailableError);
    expect(counts()).toEqual({ secrets: 0, services: 0, deployments: 0 });
  });
});

describe('kubernetes driver: configuration', () => {
  it('is chosen by HOSTING_DRIVER=kubernetes with KUBECONFIG and KUBERNETES_NAMESPACE', async () => {
    const config: DriverConfig = {
      HOSTING_DRIVER: 'kubernetes',
      HOSTING_API_URL: 'https://unused.example',
      HOSTING_API_KEY: undefined,
      HOSTING_OWNER_ID: undefined,
      AGENT_IMAGE: 'ghcr.io/example/agent:2',
      AGENT_RUNTIME: 'builtin',
      DATA_DIR: '/nonexistent',
      KUBECONFIG: kubeconfig,
      KUBERNETES_NAMESPACE: 'tenant-agents',
    };
    const d = createHostingDriver(config);
    expect(d.kind).toBe('kubernetes');
    const made = await d.deploy(spec({ agentId: 'k4' }));
    expect(made).toMatchObject({ externalId: 'tenant-agents/agent-k4', url: 'http://agent-k4.tenant-agents.svc.cluster.local:18789' });
    expect(k8s.store.deployments.get('tenant-agents/agent-k4')!.spec.template.spec.containers[0].image).toBe('ghcr.io/example/agent:2');
    await d.delete('k4');
    // a missing kubeconfig stops the backend's start (ready(), awaited before its workers start)
    await expect(createHostingDriver({ ...config, KUBECONFIG: join(dir, 'missing') }).ready!()).rejects.toThrow();
  });

  it('in a pod, uses the service account with the API address it is given', () => {
    const kc = loadKubeConfig({ inCluster: { host: '10.96.0.1', port: '443' }, serviceAccountDir: '/sa' });
    expect(kc.getCurrentCluster()).toMatchObject({ server: 'https://10.96.0.1:443', caFile: '/sa/ca.crt' });
    expect(kc.getCurrentUser()?.authProvider).toEqual({ name: 'tokenFile', config: { tokenFile: '/sa/token' } });
    expect(loadKubeConfig({ inCluster: { host: 'fd00::1', port: '6443' } }).getCurrentCluster()?.server).toBe('https://[fd00::1]:6443');
  });

  it('derives DNS-1123 names from any agent id, distinct per id', () => {
    expect(objectName('a1b2c3')).toBe('agent-a1b2c3');
    const long = `a${'b'.repeat(62)}`;
    const names = [objectName(long), objectName(`${long.slice(0, -1)}c`), objectName('Weird_ID')];
    for (const n of names) expect(n).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
    expect(new Set(names).size).toBe(3);
  });
});

describe('kubernetes driver: reading the cluster', () => {
  const d = (status: V1DeploymentStatus, over: { replicas?: number; annotations?: Record<string, string> } = {}) =>
    ({
      metadata: { generation: 2, annotations: over.annotations ?? {} },
      spec: { replicas: over.replicas ?? 1 },
      status,
    }) as V1Deployment;

  it('running only once the current spec is rolled out and ready', () => {
    expect(deploymentStatus(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1 }))).toBe('running');
    // the controller has not seen the new spec yet, or an old pod is still the ready one
    expect(deploymentStatus(d({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1 }))).toBe('starting');
    expect(deploymentStatus(d({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, readyReplicas: 1 }))).toBe('starting');
    expect(deploymentStatus(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1 }))).toBe('starting');
    const gaveUp = {
      observedGeneration: 2,
      replicas: 1,
      updatedReplicas: 1,
      conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }],
    };
    expect(deploymentStatus(d(gaveUp))).toBe('error');
    expect(deploymentStatus(d({}, { replicas: 0 }))).toBe('stopped');
    expect(deploymentStatus(d({}, { replicas: 0, annotations: { 'agent-platform/suspended': 'true' } }))).toBe('suspended');
  });

  it('parses pods/log lines and Kubernetes quantities', () => {
    const lines = parsePodLog(
      '2026-01-02T03:04:05.000000001Z {"level":"warning","message":"slow"}\nno timestamp here ERROR x\n\n',
      'container',
    );
    expect(lines).toEqual([
      { timestamp: '2026-01-02T03:04:05.000Z', level: 'warn', message: 'slow', source: 'container' },
      { timestamp: new Date(0).toISOString(), level: 'error', message: 'no timestamp here ERROR x', source: 'container' },
    ]);
    expect([
      parseQuantity('250m'),
      parseQuantity('1500000000n'),
      parseQuantity('2'),
      parseQuantity('512Mi'),
      parseQuantity('1Gi'),
      parseQuantity('1k'),
    ]).toEqual([0.25, 1.5, 2, 512 * 1024 ** 2, 1024 ** 3, 1000]);
    expect(parseQuantity('lots')).toBe(0);
  });
});
