/**
 * The `kubernetes` driver (docs/agents.md "Kubernetes driver"): per agent a Secret (its own
 * credentials), a ClusterIP Service on the gateway port 18789 and a Deployment of one locked-down
 * pod, all in KUBERNETES_NAMESPACE, named from the agent id and labelled
 * `agent-platform/agent-id=<id>`, `app.kubernetes.io/managed-by=agent-platform`. The driver keeps
 * no state: everything it reports (readiness, replicas, logs, metrics) is read from the cluster.
 *
 * deploy converges rather than creates: each object is read, created when absent (a 409 from a
 * create that raced or whose answer was lost means "read it again"), kept when its spec-hash
 * annotation matches, else replaced at the resourceVersion read. A deploy that fails half-way
 * (Secret made, Service refused) throws HostingUnavailableError; the deploy job retries it and the
 * retry finishes the same single set of objects.
 *
 * Calls used (the Role in the Helm chart grants exactly these): apps/v1 deployments
 * get/create/update/patch/delete and deployments/scale patch; v1 services and secrets
 * get/create/update/delete; v1 pods list and pods/log get; metrics.k8s.io pods get.
 */
import type { V1Deployment, V1ObjectMeta } from '@kubernetes/client-node';
import { LIMITS } from '../../../../config/limits.ts';
import { type AgentDeploySpec, AgentNotDeployedError, type HostingDriver, HostingUnavailableError, idleStats } from '../driver.contract.ts';
import { type ClusterOptions, call, createKubernetesApis, KubernetesConflict, loadKubeConfig } from './kubernetes.client.ts';
import {
  agentObjects,
  agentSelector,
  CONTAINER_NAME,
  objectName,
  RESTARTED_AT_ANNOTATION,
  SPEC_HASH_ANNOTATION,
  SUSPENDED_ANNOTATION,
} from './kubernetes-objects.rules.ts';
import { currentPod, deploymentStatus, type PodMetrics, parsePodLog, parseQuantity, podUsage } from './kubernetes-observe.service.ts';

export type KubernetesDriverOptions = ClusterOptions & {
  namespace: string;
  image: string;
  /** where the platform reaches an agent's Service (default its cluster DNS name on 18789); tests point it at a local address */
  serviceUrl?: (service: string, namespace: string) => string;
  /** per-call timeout (default 15 s) */
  timeoutMs?: number;
  /** the clock for rollout restarts and uptime */
  now?: () => Date;
};

const port = LIMITS.agentGatewayPort;

export function createKubernetesDriver(options: KubernetesDriverOptions): HostingDriver {
  const kc = loadKubeConfig(options);
  const apis = createKubernetesApis(kc, options.timeoutMs ?? 15_000);
  const { apps, core, custom } = apis;
  const namespace = options.namespace;
  const now = options.now ?? (() => new Date());
  const urlOf = (name: string) => options.serviceUrl?.(name, namespace) ?? `http://${name}.${namespace}.svc.cluster.local:${port}`;
  const ref = (agentId: string) => ({ name: objectName(agentId), namespace });

  const readDeployment = (agentId: string) =>
    call('read Deployment', () => apps.readNamespacedDeployment(ref(agentId), apis.options), 'undefined');

  async function requireDeployment(agentId: string): Promise<V1Deployment> {
    const d = await readDeployment(agentId);
    if (!d) throw new AgentNotDeployedError(`agent ${agentId} has no Deployment in namespace ${namespace}`);
    return d;
  }

  const patchDeployment = (agentId: string, body: object) =>
    call('patch Deployment', () => apps.patchNamespacedDeployment({ ...ref(agentId), body }, apis.mergePatch));

  /** Replicas back to 1, and no longer marked suspended (one patch, so no reader sees half of it). */
  const scaleUp = (agentId: string) =>
    patchDeployment(agentId, { metadata: { annotations: { [SUSPENDED_ANNOTATION]: null } }, spec: { replicas: 1 } });

  /**
   * Makes one object match `desired`: read → create when absent → keep when its spec hash is the
   * wanted one → replace at the read resourceVersion. A 409 (created meanwhile, or changed between
   * read and replace) starts over from the read; three rounds of that is a cluster in flux.
   */
  async function converge<T extends { metadata?: V1ObjectMeta }>(
    kind: string,
    desired: T,
    ops: { read(): Promise<T>; create(body: T): Promise<T>; replace(body: T): Promise<T> },
    keep: (current: T, body: T) => T = (_c, body) => body,
  ): Promise<{ object: T; changed: boolean }> {
    const hash = desired.metadata?.annotations?.[SPEC_HASH_ANNOTATION];
    for (let round = 0; round < 3; round++) {
      const current = await call(`read ${kind}`, ops.read, 'undefined');
      try {
        if (!current) return { object: await call(`create ${kind}`, () => ops.create(desired)), changed: true };
        if (current.metadata?.annotations?.[SPEC_HASH_ANNOTATION] === hash) return { object: current, changed: false };
        const body = { ...desired, metadata: { ...desired.metadata, resourceVersion: current.metadata?.resourceVersion } };
        return { object: await call(`replace ${kind}`, () => ops.replace(keep(current, body))), changed: true };
      } catch (err) {
        if (!(err instanceof KubernetesConflict)) throw err;
      }
    }
    throw new HostingUnavailableError(`Kubernetes API: the ${kind} kept changing during the deploy`);
  }

  return {
    kind: 'kubernetes',

    async deploy(spec: AgentDeploySpec) {
      const objects = agentObjects(spec, { namespace, image: options.image });
      const at = { name: objects.name, namespace };
      // the Secret first and the Deployment last: no pod ever starts without its credentials
      await converge('Secret', objects.secret, {
        read: () => core.readNamespacedSecret(at, apis.options),
        create: (body) => core.createNamespacedSecret({ namespace, body }, apis.options),
        replace: (body) => core.replaceNamespacedSecret({ ...at, body }, apis.options),
      });
      await converge(
        'Service',
        objects.service,
        {
          read: () => core.readNamespacedService(at, apis.options),
          create: (body) => core.createNamespacedService({ namespace, body }, apis.options),
          replace: (body) => core.replaceNamespacedService({ ...at, body }, apis.options),
        },
        // a Service's cluster IP is immutable: a replacement carries the one it has
        (current, body) => ({
          ...body,
          spec: { ...body.spec, clusterIP: current.spec?.clusterIP, clusterIPs: current.spec?.clusterIPs },
        }),
      );
      const { object, changed } = await converge('Deployment', objects.deployment, {
        read: () => apps.readNamespacedDeployment(at, apis.options),
        create: (body) => apps.createNamespacedDeployment({ namespace, body }, apis.options),
        replace: (body) => apps.replaceNamespacedDeployment({ ...at, body }, apis.options),
      });
      const externalId = `${namespace}/${objects.name}`;
      if (changed) return { externalId, url: urlOf(objects.name), status: 'starting' };
      // the same spec: adopt it, running again if it was stopped or suspended
      const status = deploymentStatus(object);
      if (status === 'stopped' || status === 'suspended') {
        await scaleUp(spec.agentId);
        return { externalId, url: urlOf(objects.name), status: 'starting' };
      }
      return { externalId, url: urlOf(objects.name), status };
    },

    async status(agentId: string) {
      const d = await readDeployment(agentId);
      if (!d) return { status: 'not_found' as const };
      return { status: deploymentStatus(d), url: urlOf(objectName(agentId)) };
    },

    /** Scaled to 0: scale back to 1; otherwise a rollout restart, as `kubectl rollout restart` does it. */
    async restart(agentId: string) {
      const d = await requireDeployment(agentId);
      if ((d.spec?.replicas ?? 1) === 0) {
        await scaleUp(agentId);
        return;
      }
      await patchDeployment(agentId, {
        spec: { template: { metadata: { annotations: { [RESTARTED_AT_ANNOTATION]: now().toISOString() } } } },
      });
    },

    async suspend(agentId: string) {
      await requireDeployment(agentId);
      await patchDeployment(agentId, { metadata: { annotations: { [SUSPENDED_ANNOTATION]: 'true' } }, spec: { replicas: 0 } });
    },

    /** The watchdog's repair step: no pod until restart() scales the Deployment up again. */
    async stop(agentId: string) {
      await requireDeployment(agentId);
      await call('scale Deployment', () =>
        apps.patchNamespacedDeploymentScale({ ...ref(agentId), body: { spec: { replicas: 0 } } }, apis.mergePatch),
      );
    },

    async resume(agentId: string) {
      const d = await requireDeployment(agentId);
      const status = deploymentStatus(d);
      if (status === 'stopped' || status === 'suspended') await scaleUp(agentId);
    },

    async delete(agentId: string) {
      const at = ref(agentId);
      // Background: the Deployment goes now, the garbage collector removes its ReplicaSet and pods
      await call(
        'delete Deployment',
        () => apps.deleteNamespacedDeployment({ ...at, propagationPolicy: 'Background' }, apis.options),
        'undefined',
      );
      await call('delete Service', () => core.deleteNamespacedService(at, apis.options), 'undefined');
      await call('delete Secret', () => core.deleteNamespacedSecret(at, apis.options), 'undefined');
    },

    async logs(agentId: string, opts: { limit: number; level?: string }) {
      const limit = Math.max(0, Math.floor(opts.limit));
      if (limit === 0) return [];
      const pods = await call('list Pods', () =>
        core.listNamespacedPod({ namespace, labelSelector: agentSelector(agentId) }, apis.options),
      );
      const pod = currentPod(pods.items);
      if (!pod?.metadata?.name) return [];
      const podName = pod.metadata.name;
      // with a level filter, read further back so `limit` lines of that level can be found
      const tailLines = opts.level ? Math.min(limit * 10, 10_000) : limit;
      let text: string;
      try {
        text = await call('read Pod log', () =>
          core.readNamespacedPodLog({ name: podName, namespace, container: CONTAINER_NAME, tailLines, timestamps: true }, apis.options),
        );
      } catch (err) {
        // a container still being created has no log yet (400 "waiting to start")
        if (err instanceof HostingUnavailableError) throw err;
        return [];
      }
      const lines = parsePodLog(text, 'container');
      const filtered = opts.level ? lines.filter((l) => l.level === opts.level) : lines;
      return filtered.slice(-limit);
    },

    async stats(agentId: string) {
      const d = await readDeployment(agentId);
      if (!d) return idleStats('not_found');
      const status = deploymentStatus(d);
      if (status !== 'running' && status !== 'starting') return idleStats(status);
      const pods = await call('list Pods', () =>
        core.listNamespacedPod({ namespace, labelSelector: agentSelector(agentId) }, apis.options),
      );
      const pod = currentPod(pods.items);
      const podName = pod?.metadata?.name;
      if (!podName) return idleStats(status);
      // metrics.k8s.io exists only where metrics-server (or a replacement) is installed: absent, down or refused means no numbers
      const metrics = await call(
        'read PodMetrics',
        () =>
          custom.getNamespacedCustomObject(
            { group: 'metrics.k8s.io', version: 'v1beta1', namespace, plural: 'pods', name: podName },
            apis.options,
          ) as Promise<PodMetrics>,
        'undefined',
      ).catch(() => undefined);
      const { cores, bytes } = podUsage(metrics);
      const container = d.spec?.template?.spec?.containers?.find((c) => c.name === CONTAINER_NAME);
      const memoryLimit = parseQuantity(container?.resources?.limits?.memory);
      const started =
        pod.status?.containerStatuses?.find((c) => c.name === CONTAINER_NAME)?.state?.running?.startedAt ?? pod.status?.startTime;
      const startedMs = started ? new Date(started).getTime() : Number.NaN;
      return {
        ...idleStats(status),
        cpu: Math.round(cores * 1000) / 10, // % of one core, like the local driver
        memory: Math.round(bytes),
        memoryPercent: memoryLimit > 0 ? Math.round((bytes / memoryLimit) * 10_000) / 100 : 0,
        uptime: Number.isFinite(startedMs) ? Math.max(0, Math.round((now().getTime() - startedMs) / 1000)) : 0,
      };
    },

    async shutdown() {
      // agents run in the cluster, not in this process
    },
  };
}
