/**
 * The Helm chart (docs/production.md "Helm chart") rendered and linted by the machine's helm (skipped
 * with a message where there is none; chart-source.test.ts checks the sources without it), and every
 * object validated against the Kubernetes OpenAPI schemas (kubernetes-models). Settings it gives
 * the apps must be settings of src/config/env.ts. Its defaults for the agents' namespace: a
 * default-deny NetworkPolicy that lets agent pods (as the kubernetes driver makes them) talk only to
 * the backend and DNS, TRUST_PROXY from a value of its own, a size on every emptyDir.
 * compose.yaml and the Dockerfiles: compose-and-images.test.ts; the images' layout run: image-layout.e2e.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { LIMITS } from '../../src/config/limits.ts';
import { agentObjects } from '../../src/domains/agents/drivers/kubernetes/kubernetes-objects.rules.ts';
import { helm, helmAvailable } from './helm.ts';
import { parseSettings, unknownSettings } from './settings.ts';

const ROOT = join(import.meta.dirname, '../..');
const CHART = join(ROOT, 'deploy/helm/agent-platform');
const CI_VALUES = join(CHART, 'ci/production-values.yaml');
const NAMESPACE = 'platform';

/** Verbs of the client methods (`readNamespacedPod`: get) and resources of their kinds. */
const VERBS: Record<string, string> = {
  read: 'get',
  get: 'get',
  list: 'list',
  create: 'create',
  replace: 'update',
  patch: 'patch',
  delete: 'delete',
};
const RESOURCES: Record<string, string> = {
  Deployment: 'apps/deployments',
  DeploymentScale: 'apps/deployments/scale',
  Service: 'core/services',
  Secret: 'core/secrets',
  Pod: 'core/pods',
  PodLog: 'core/pods/log',
};

/**
 * The API calls of the kubernetes driver, read from its source (@kubernetes/client-node method
 * names such as `patchNamespacedDeploymentScale`), as `resource: verbs` lines like the Role's.
 * Custom objects are the metrics API's PodMetrics, the one the driver reads.
 */
function kubernetesDriverCalls(): string[] {
  const dir = join(ROOT, 'src/domains/agents/drivers/kubernetes');
  const source = readdirSync(dir)
    .filter((f) => /^kubernetes.*\.ts$/.test(f) && !f.endsWith('.test.ts'))
    .map((f) => readFileSync(join(dir, f), 'utf8'))
    .join('\n');
  const verbs = new Map<string, Set<string>>();
  for (const [, verb, kind] of source.matchAll(/\b(read|get|list|create|replace|patch|delete)Namespaced([A-Za-z]+)\(/g)) {
    const resource =
      kind === 'CustomObject' && /group: 'metrics\.k8s\.io'[^}]*plural: 'pods'/.test(source) ? 'metrics.k8s.io/pods' : RESOURCES[kind!];
    expect(resource, `the driver calls ${verb}Namespaced${kind}: add its resource to the chart's Role`).toBeDefined();
    verbs.set(resource!, (verbs.get(resource!) ?? new Set()).add(VERBS[verb!]!));
  }
  return [...verbs].map(([resource, v]) => `${resource}: ${[...v].sort().join(',')}`).sort();
}

type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
} & Record<string, any>;

/** The model class validating each kind the chart may render (ServiceMonitor is a CRD: checked by hand below). */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ServiceAccount': ServiceAccount,
  'v1/Secret': Secret,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
};

function render(args: string[] = []): K8sObject[] {
  const r = helm(['template', 'rel', CHART, '--namespace', NAMESPACE, '-f', CI_VALUES, ...args]);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

type Selector = { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };

/** Whether a Kubernetes label selector selects `labels` (matchLabels, and In/NotIn/Exists/DoesNotExist expressions). */
function selects(selector: Selector, labels: Record<string, string>): boolean {
  const byLabel = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const byExpression = (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    if (operator === 'Exists') return key in labels;
    if (operator === 'DoesNotExist') return !(key in labels);
    if (operator === 'In') return key in labels && values.includes(labels[key]!);
    if (operator === 'NotIn') return !(key in labels) || !values.includes(labels[key]!);
    throw new Error(`operator ${operator}`);
  });
  return byLabel && byExpression;
}

/** A pod as the kubernetes driver makes it for an agent (the labels and volumes the chart's policy must match). */
const agentPod = () =>
  agentObjects(
    {
      agentId: '0b5f2a4e-8a83-4a53-9d47-3c2f7f6f7d11',
      userId: 'u',
      plan: 'solo',
      gatewayToken: 'g'.repeat(48),
      platformApiKey: 'k',
      backendUrl: 'http://backend',
      config: {},
    },
    { namespace: 'agents', image: 'agent:1' },
  ).deployment.spec!.template;

const one = (objects: K8sObject[], kind: string, name: string) => {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found, `${kind} ${name}`).toHaveLength(1);
  return found[0]!;
};

describe.skipIf(!helmAvailable('the Helm chart rendered by helm'))('Helm chart deploy/helm/agent-platform (rendered by helm)', () => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = render();
  });

  it('passes helm lint --strict with the CI values', () => {
    const r = helm(['lint', CHART, '--strict', '-f', CI_VALUES]);
    expect(r.stdout + r.stderr).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.status).toBe(0);
  });

  it('renders exactly the expected objects, each valid against the Kubernetes schemas', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      [
        'ConfigMap/rel-agent-platform',
        'Deployment/rel-agent-platform-backend',
        'Deployment/rel-agent-platform-web',
        'Ingress/rel-agent-platform',
        'NetworkPolicy/rel-agent-platform-agents',
        'PodDisruptionBudget/rel-agent-platform-backend',
        'PodDisruptionBudget/rel-agent-platform-web',
        'Role/rel-agent-platform-agents',
        'RoleBinding/rel-agent-platform-agents',
        'Secret/rel-agent-platform',
        'Service/rel-agent-platform-backend',
        'Service/rel-agent-platform-web',
        'ServiceAccount/rel-agent-platform',
        'ServiceMonitor/rel-agent-platform',
      ].sort(),
    );
    for (const o of objects) {
      if (o.kind === 'ServiceMonitor') continue;
      const Model = MODELS[`${o.apiVersion}/${o.kind}`];
      expect(Model, `${o.apiVersion} ${o.kind} has a schema`).toBeDefined();
      expect(() => new Model!(o as never).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
    }
  });

  it('the schemas do refuse a broken object (the validation above can fail)', () => {
    const web = structuredClone(one(objects, 'Deployment', 'rel-agent-platform-web'));
    web.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => new Deployment(web as never).validate()).toThrow(/containerPort/);
  });

  for (const [app, port, health] of [
    ['web', 3000, '/api/health'],
    ['backend', 3001, '/health'],
  ] as const) {
    it(`the ${app} Deployment: APP=${app}, non-root, read-only root filesystem, probes on ${health}, its Service`, () => {
      const d = one(objects, 'Deployment', `rel-agent-platform-${app}`);
      const pod = d.spec.template.spec;
      const [c] = pod.containers;
      expect(c.env).toContainEqual({ name: 'APP', value: app });
      expect(c.image).toBe(`ghcr.io/agent-platform/agent-platform:${parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')).appVersion}`);
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(pod.securityContext.runAsUser).not.toBe(0);
      expect(c.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
      for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
        expect(c[probe].httpGet, `${app} ${probe}`).toEqual({ path: health, port: 'http' });
      expect(c.ports).toEqual([{ name: 'http', containerPort: port, protocol: 'TCP' }]);
      // the read-only root leaves DATA_DIR and /tmp writable through emptyDir volumes, each bounded
      const mounts = Object.fromEntries(c.volumeMounts.map((m: { name: string; mountPath: string }) => [m.mountPath, m.name]));
      expect(mounts).toEqual({ '/data': 'data', '/tmp': 'tmp' });
      expect(pod.volumes.every((v: { emptyDir?: { sizeLimit?: string } }) => v.emptyDir?.sizeLimit === '256Mi')).toBe(true);
      expect(c.envFrom).toEqual([{ configMapRef: { name: 'rel-agent-platform' } }, { secretRef: { name: 'rel-agent-platform' } }]);
      expect(pod.serviceAccountName).toBe('rel-agent-platform');

      const svc = one(objects, 'Service', `rel-agent-platform-${app}`);
      expect(svc.spec.ports).toEqual([{ name: 'http', port, targetPort: 'http', protocol: 'TCP' }]);
      expect(d.spec.template.metadata.labels).toMatchObject(svc.spec.selector);
      expect(d.spec.selector.matchLabels).toEqual(svc.spec.selector);
      // the other app's pods are not behind this Service
      const other = one(objects, 'Deployment', `rel-agent-platform-${app === 'web' ? 'backend' : 'web'}`);
      expect(other.spec.template.metadata.labels).not.toMatchObject(svc.spec.selector);
    });
  }

  it('PodDisruptionBudget: one pod of each app stays through a drain; none for an app of one replica', () => {
    for (const app of ['web', 'backend']) {
      const pdb = one(objects, 'PodDisruptionBudget', `rel-agent-platform-${app}`);
      expect(pdb.spec.minAvailable).toBe(1);
      expect(pdb.spec.selector.matchLabels).toEqual(one(objects, 'Deployment', `rel-agent-platform-${app}`).spec.selector.matchLabels);
    }
    const single = render(['--set', 'backend.replicas=1']);
    expect(single.filter((o) => o.kind === 'PodDisruptionBudget').map((o) => o.metadata.name)).toEqual(['rel-agent-platform-web']);
  });

  it('ConfigMap and Secret hold settings of src/config/env.ts that parse as the platform parses them', () => {
    const cm = one(objects, 'ConfigMap', 'rel-agent-platform');
    const secret = one(objects, 'Secret', 'rel-agent-platform');
    const env = { ...cm.data, ...secret.stringData };
    expect(unknownSettings(env)).toEqual([]);
    const config = parseSettings({ ...env, APP: 'backend' });
    expect(config).toMatchObject({ HOSTING_DRIVER: 'kubernetes', KUBERNETES_NAMESPACE: 'agents', HOST: '0.0.0.0', DATA_DIR: '/data' });
    // agents in their own namespace reach the backend's AI gateway at its cluster address
    expect(config.AGENT_GATEWAY_URL).toBe(`http://rel-agent-platform-backend.${NAMESPACE}.svc.cluster.local:3001/api/agent-gateway/v1`);
    expect(Object.keys(secret.stringData).sort()).toEqual(
      [
        'DATABASE_REQUEST_URL',
        'DATABASE_URL',
        'INTERNAL_API_KEY',
        'METRICS_TOKEN',
        'REDIS_URL',
        'ROUTER_API_KEY',
        'SECRETS_ENCRYPTION_KEY',
        'SMTP_URL',
        'STRIPE_SECRET_KEY',
        'WALLET_ENCRYPTION_KEY',
      ].sort(),
    );
    // the model provider and the mail server are wired: agents have a model, password reset has SMTP
    expect(config.ROUTER_BASE_URL).toBe(parse(readFileSync(CI_VALUES, 'utf8')).config.ROUTER_BASE_URL);
    expect(config.configured.router).toBe(true);
    expect(config.SMTP_URL).toMatch(/^smtps:\/\/[^:]+:[^@]+@/);
    // secrets never sit in the ConfigMap
    for (const name of Object.keys(secret.stringData)) expect(Object.keys(cm.data)).not.toContain(name);
    // and a name the code does not know is reported
    expect(unknownSettings({ KUBERNETES_NAMESPACES: 'agents' })).toEqual(['KUBERNETES_NAMESPACES']);
  });

  it('a secret setting put in config stops the render; an extra one in secret.values goes to the Secret; an empty one is left out', () => {
    for (const name of [
      'SMTP_URL',
      'ROUTER_API_KEY',
      'OPENAI_API_KEY',
      'STRIPE_SECRET_KEY',
      'STRIPE_WEBHOOK_SECRET',
      'KV_REST_API_TOKEN',
    ]) {
      const r = helm(['template', 'rel', CHART, '--namespace', NAMESPACE, '-f', CI_VALUES, '--set', `config.${name}=leaked`]);
      expect(r.status, name).not.toBe(0);
      expect(r.stderr).toContain(`config.${name} is a secret: set secret.values.${name} instead`);
    }
    // a public key is not a secret
    expect(one(render(['--set', 'config.CDP_IMPORT_PUBLIC_KEY=pem']), 'ConfigMap', 'rel-agent-platform').data.CDP_IMPORT_PUBLIC_KEY).toBe(
      'pem',
    );
    const objs = render(['--set', 'secret.values.ANTHROPIC_API_KEY=sk-ant-x', '--set', 'secret.values.SMTP_URL=']);
    const secret = one(objs, 'Secret', 'rel-agent-platform');
    expect(secret.stringData.ANTHROPIC_API_KEY).toBe('sk-ant-x');
    expect(secret.stringData).not.toHaveProperty('SMTP_URL');
    expect(one(objs, 'ConfigMap', 'rel-agent-platform').data).not.toHaveProperty('ANTHROPIC_API_KEY');
  });

  it('RBAC: a Role in the agents namespace with exactly what the kubernetes driver uses, bound to the apps', () => {
    const custom = render(['--set', 'agents.namespace=agents-prod']);
    expect(custom.some((o) => o.kind.startsWith('Cluster'))).toBe(false);
    const role = one(custom, 'Role', 'rel-agent-platform-agents');
    expect(role.metadata.namespace).toBe('agents-prod');
    expect(one(custom, 'ConfigMap', 'rel-agent-platform').data.KUBERNETES_NAMESPACE).toBe('agents-prod');
    const granted = role.rules.flatMap((r: { apiGroups: string[]; resources: string[]; verbs: string[] }) =>
      r.apiGroups.flatMap((g) => r.resources.map((res) => `${g || 'core'}/${res}: ${[...r.verbs].sort().join(',')}`)),
    );
    expect(granted.sort()).toEqual(
      [
        'apps/deployments: create,delete,get,patch,update',
        'apps/deployments/scale: patch',
        'core/services: create,delete,get,update',
        'core/secrets: create,delete,get,update',
        'core/pods: list',
        'core/pods/log: get',
        'metrics.k8s.io/pods: get',
      ].sort(),
    );
    // and that is what the driver calls: a call added to it without a grant fails here
    expect(granted.sort()).toEqual(kubernetesDriverCalls());
    const binding = one(custom, 'RoleBinding', 'rel-agent-platform-agents');
    expect(binding.metadata.namespace).toBe('agents-prod');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'rel-agent-platform-agents' });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'rel-agent-platform', namespace: NAMESPACE }]);
  });

  it('ServiceMonitor: /metrics of both Services with the bearer METRICS_TOKEN from the Secret; off by default', () => {
    const sm = one(objects, 'ServiceMonitor', 'rel-agent-platform');
    expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(sm.spec.endpoints).toHaveLength(1);
    const [endpoint] = sm.spec.endpoints;
    expect(endpoint).toMatchObject({ port: 'http', path: '/metrics' });
    expect(endpoint.authorization).toEqual({ type: 'Bearer', credentials: { name: 'rel-agent-platform', key: 'METRICS_TOKEN' } });
    expect(one(objects, 'Secret', 'rel-agent-platform').stringData.METRICS_TOKEN).toBeTruthy();
    for (const app of ['web', 'backend']) {
      const svc = one(objects, 'Service', `rel-agent-platform-${app}`);
      expect(svc.metadata.labels).toMatchObject(sm.spec.selector.matchLabels);
      expect(svc.spec.ports.map((p: { name: string }) => p.name)).toContain(endpoint.port);
    }
    expect(render(['--set', 'metrics.serviceMonitor.enabled=false']).some((o) => o.kind === 'ServiceMonitor')).toBe(false);
  });

  it('existingSecret: no Secret rendered; the apps and the ServiceMonitor read the named one', () => {
    const objs = render(['--set', 'secret.existingSecret=platform-keys']);
    expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
    for (const app of ['web', 'backend'])
      expect(one(objs, 'Deployment', `rel-agent-platform-${app}`).spec.template.spec.containers[0].envFrom).toContainEqual({
        secretRef: { name: 'platform-keys' },
      });
    expect(one(objs, 'ServiceMonitor', 'rel-agent-platform').spec.endpoints[0].authorization.credentials.name).toBe('platform-keys');
  });

  it('Ingress: the web Service only, with TLS when enabled', () => {
    const ing = one(objects, 'Ingress', 'rel-agent-platform');
    expect(ing.spec.tls).toEqual([{ hosts: ['platform.example.com'], secretName: 'platform-tls' }]);
    expect(ing.spec.rules[0].http.paths[0].backend.service).toEqual({ name: 'rel-agent-platform-web', port: { name: 'http' } });
    expect(render(['--set', 'ingress.enabled=false']).some((o) => o.kind === 'Ingress')).toBe(false);
  });

  it('NetworkPolicy: agent pods take connections only from the platform, and reach only the backend and DNS', () => {
    const np = one(objects, 'NetworkPolicy', 'rel-agent-platform-agents');
    expect(np.metadata.namespace).toBe('agents');
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    // it selects the pods the kubernetes driver makes for agents, and not the platform's own
    const pod = agentPod();
    expect(selects(np.spec.podSelector, pod.metadata!.labels!)).toBe(true);
    const web = one(objects, 'Deployment', 'rel-agent-platform-web').spec.template.metadata.labels;
    const backend = one(objects, 'Deployment', 'rel-agent-platform-backend').spec.template.metadata.labels;
    expect(selects(np.spec.podSelector, web)).toBe(false);

    // in: the web and backend pods of this release (in its namespace) on the gateway port; no one else
    expect(np.spec.ingress).toHaveLength(1);
    const [inbound] = np.spec.ingress;
    expect(inbound.ports).toEqual([{ protocol: 'TCP', port: LIMITS.agentGatewayPort }]);
    expect(inbound.from).toHaveLength(1);
    const [peer] = inbound.from;
    expect(peer.namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': NAMESPACE } });
    expect([selects(peer.podSelector, web), selects(peer.podSelector, backend)]).toEqual([true, true]);
    expect(selects(peer.podSelector, { ...web, 'app.kubernetes.io/instance': 'another-release' })).toBe(false);
    expect(selects(peer.podSelector, pod.metadata!.labels!)).toBe(false);

    // out: the backend's pods on its port (the AI gateway, docs/agents.md "Model access"), and DNS; not the web app,
    // whose TRUST_PROXY an agent must not meet, nor PostgreSQL, Redis or other agents
    expect(np.spec.egress).toHaveLength(2);
    const [toBackend, toDns] = np.spec.egress;
    expect(toBackend.ports).toEqual([{ protocol: 'TCP', port: 3001 }]);
    expect(toBackend.to).toHaveLength(1);
    expect(toBackend.to[0].namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': NAMESPACE } });
    expect([selects(toBackend.to[0].podSelector, backend), selects(toBackend.to[0].podSelector, web)]).toEqual([true, false]);
    expect(toBackend.to[0].ipBlock).toBeUndefined();
    expect(toDns.to).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ]);
    expect(toDns.ports).toEqual([
      { protocol: 'UDP', port: 53 },
      { protocol: 'TCP', port: 53 },
    ]);
    // the agents' model is reached through that backend: its AI gateway is at the backend Service
    const cm = one(objects, 'ConfigMap', 'rel-agent-platform');
    expect(parseSettings({ ...cm.data, APP: 'backend' }).AGENT_GATEWAY_URL).toMatch(
      new RegExp(`^http://rel-agent-platform-backend\\.${NAMESPACE}\\.svc\\.cluster\\.local:3001/`),
    );

    // more egress only when the operator adds it (e.g. the internet for OpenClaw's tools); off only when asked
    const extra = one(
      render([
        '--set-json',
        'networkPolicy.agentsExtraEgress=[{"to":[{"ipBlock":{"cidr":"0.0.0.0/0"}}],"ports":[{"protocol":"TCP","port":443}]}]',
      ]),
      'NetworkPolicy',
      'rel-agent-platform-agents',
    );
    expect(extra.spec.egress).toHaveLength(3);
    expect(extra.spec.egress[2]).toEqual({ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }], ports: [{ protocol: 'TCP', port: 443 }] });
    expect(render(['--set', 'networkPolicy.enabled=false']).some((o) => o.kind === 'NetworkPolicy')).toBe(false);
  });

  it('TRUST_PROXY comes from trustedProxies (the ingress controller), "false" by default, never from config', () => {
    expect(one(objects, 'ConfigMap', 'rel-agent-platform').data.TRUST_PROXY).toBe(parse(readFileSync(CI_VALUES, 'utf8')).trustedProxies);
    const defaults = helm(['template', 'rel', CHART, '--namespace', NAMESPACE, '--set', 'secret.existingSecret=keys']);
    expect(defaults.status).toBe(0);
    const cm = parseAllDocuments(defaults.stdout)
      .map((d) => d.toJS() as K8sObject | null)
      .find((o) => o?.kind === 'ConfigMap')!;
    expect(cm.data.TRUST_PROXY).toBe('false');
    expect(parseSettings({ TRUST_PROXY: cm.data.TRUST_PROXY }).TRUST_PROXY).toBe(false);
    // the old way (config.TRUST_PROXY, 10.0.0.0/8: the pod network, agents included) stops the render with the new name
    const old = helm(['template', 'rel', CHART, '--namespace', NAMESPACE, '-f', CI_VALUES, '--set', 'config.TRUST_PROXY=10.0.0.0/8']);
    expect(old.status).not.toBe(0);
    expect(old.stderr).toContain('set trustedProxies');
  });

  it("agents always run as pods of their own: HOSTING_DRIVER is the chart's, whatever config says", () => {
    const cm = one(
      render(['--set', 'config.HOSTING_DRIVER=local', '--set', 'config.AGENT_SANDBOX=off']),
      'ConfigMap',
      'rel-agent-platform',
    );
    expect(cm.data.HOSTING_DRIVER).toBe('kubernetes');
  });

  it("every emptyDir has a sizeLimit: the chart's pods, and the agent pods the kubernetes driver makes", () => {
    const emptyDirs = objects
      .filter((o) => o.kind === 'Deployment')
      .flatMap((o) => o.spec.template.spec.volumes as { name: string; emptyDir?: { sizeLimit?: string } }[]);
    const pod = agentPod();
    const all = [...emptyDirs, ...(pod.spec!.volumes as { name: string; emptyDir?: { sizeLimit?: string } }[])].filter((v) => v.emptyDir);
    expect(all.length).toBe(6);
    for (const v of all) expect(v.emptyDir!.sizeLimit, v.name).toMatch(/^\d+(Mi|Gi)$/);
    expect(pod.spec!.containers[0]!.resources!.limits!['ephemeral-storage']).toBeDefined();
  });

  it('refuses to render without the required secrets (unless existingSecret names them)', () => {
    const r = helm(['template', 'rel', CHART, '--namespace', NAMESPACE]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('secret.values.DATABASE_URL is required');
    expect(helm(['template', 'rel', CHART, '--namespace', NAMESPACE, '--set', 'secret.existingSecret=keys']).status).toBe(0);
  });
});
