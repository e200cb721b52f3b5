/**
 * The three objects the kubernetes driver keeps per agent (docs/agents.md "Kubernetes driver"): a
 * Secret with the agent's own credentials, a ClusterIP Service on the gateway port, and a
 * Deployment of one locked-down pod. Pure functions of the deploy spec, so the same spec always
 * gives the same objects and the same spec hash (the annotation deploy compares to adopt).
 */
import { createHash } from 'node:crypto';
import type { V1Deployment, V1Secret, V1Service } from '@kubernetes/client-node';
import { LIMITS } from '../../../../config/limits.ts';
import { agentEnvironment, planResources } from '../agent-env.rules.ts';
import type { AgentDeploySpec } from '../driver.contract.ts';

export const AGENT_ID_LABEL = 'agent-platform/agent-id';
const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
const MANAGED_BY = 'agent-platform';
/** sha256 of everything the driver sent for the agent; equal means adopt, different means replace */
export const SPEC_HASH_ANNOTATION = 'agent-platform/spec-hash';
/** set by suspend(): replicas 0 reads `suspended` rather than `stopped` (§3 values) */
export const SUSPENDED_ANNOTATION = 'agent-platform/suspended';
/** what `kubectl rollout restart` patches into the pod template to replace the pods */
export const RESTARTED_AT_ANNOTATION = 'kubectl.kubernetes.io/restartedAt';
export const CONTAINER_NAME = 'agent';

/** The image's `node` user (the OpenClaw and built-in runtime images both run as uid 1000). */
export const AGENT_UID = 1000;

/**
 * Values of the agent's environment that are credentials or its configuration: they go into its
 * Secret, not into the Deployment (which anyone who may read Deployments in the namespace sees).
 */
const SECRET_KEYS = new Set(['AGENT_GATEWAY_TOKEN', 'OPENCLAW_GATEWAY_TOKEN', 'AGENT_PLATFORM_API_KEY', 'AGENT_CONFIG_JSON']);

const DNS_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const shortHash = (s: string, n: number) => createHash('sha256').update(s).digest('hex').slice(0, n);

/**
 * The name of all three objects: `agent-<id>` when that is a DNS-1035 label (a Service name must
 * start with a letter and fit in 63 characters), else a lower-cased, trimmed form of the id with a
 * hash of the whole id, so two ids never share a name.
 */
export function objectName(agentId: string): string {
  const plain = `agent-${agentId}`;
  if (DNS_LABEL.test(plain)) return plain;
  const cleaned = agentId
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, 45)
    .replace(/^-+|-+$/g, '');
  return `agent-${cleaned ? `${cleaned}-` : ''}${shortHash(agentId, 10)}`;
}

/** The agent id as a label value (what list calls select on), hashed when the id is not a valid one. */
export function agentLabelValue(agentId: string): string {
  return LABEL_VALUE.test(agentId) ? agentId : `h${shortHash(agentId, 40)}`;
}

export const agentSelector = (agentId: string) => `${AGENT_ID_LABEL}=${agentLabelValue(agentId)}`;

const labelsOf = (agentId: string) => ({ [AGENT_ID_LABEL]: agentLabelValue(agentId), [MANAGED_BY_LABEL]: MANAGED_BY });

/**
 * The node's disk an agent may use (docs/agents.md "Kubernetes driver"): its writable places are
 * emptyDirs on the node, so without bounds one agent could fill the disk every pod of the node
 * (the platform's among them) shares. Each emptyDir has a sizeLimit, and the container's
 * ephemeral-storage limit covers both with room for its logs; past either the kubelet evicts the
 * pod, and the Deployment starts a fresh one (the workspace is lost, as on any replacement).
 */
export const AGENT_DISK = { home: '2Gi', tmp: '1Gi', ephemeralStorage: '4Gi' } as const;

/** Kubernetes quantities for §4.7's plan (requests = limits: each agent gets what its plan pays for), and its disk. */
function resourcesOf(plan: string) {
  const r = planResources(plan);
  const quantity = {
    cpu: r.cpus >= 1 ? String(r.cpus) : `${Math.round(r.cpus * 1000)}m`,
    memory: `${r.memoryMb}Mi`,
    'ephemeral-storage': AGENT_DISK.ephemeralStorage,
  };
  return { requests: { ...quantity }, limits: { ...quantity } };
}

export type AgentObjects = { name: string; hash: string; secret: V1Secret; service: V1Service; deployment: V1Deployment };

export function agentObjects(spec: AgentDeploySpec, options: { namespace: string; image: string }): AgentObjects {
  const name = objectName(spec.agentId);
  const port = LIMITS.agentGatewayPort;
  // the gateway URL is the one the container's own tools use to reach their gateway
  const env = agentEnvironment(spec, { gatewayPort: port, gatewayUrl: `http://127.0.0.1:${port}` });
  env.AGENT_HOST = '0.0.0.0'; // §8 bind lan: the Service reaches the pod on its own address
  env.HOME = '/home/node';
  env.AGENT_WORKSPACE = '/home/node/workspace';
  env.NODE_COMPILE_CACHE = '/tmp/node-compile-cache';
  env.PORT = String(port);
  // spec.env is the agent's model base URL and key (agentEnvironment already dropped platform secrets)
  const fromSpec = new Set(Object.keys(spec.env ?? {}));
  const secretData: Record<string, string> = {};
  const plainEnv: { name: string; value: string }[] = [];
  for (const [key, value] of Object.entries(env).sort(([a], [b]) => a.localeCompare(b))) {
    if (SECRET_KEYS.has(key) || (fromSpec.has(key) && spec.env?.[key] === value)) secretData[key] = value;
    else plainEnv.push({ name: key, value });
  }
  const resources = resourcesOf(spec.plan);
  const hash = createHash('sha256')
    .update(JSON.stringify({ image: options.image, plainEnv, secretData, resources, namespace: options.namespace }))
    .digest('hex');
  const labels = labelsOf(spec.agentId);
  const metadata = (kind: string) => ({
    name,
    namespace: options.namespace,
    labels: { ...labels, 'app.kubernetes.io/name': 'agent', 'app.kubernetes.io/component': kind },
    annotations: { [SPEC_HASH_ANNOTATION]: hash, 'agent-platform/agent': spec.agentId },
  });

  const secret: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: metadata('credentials'),
    type: 'Opaque',
    stringData: secretData,
  };

  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata('gateway'),
    spec: {
      type: 'ClusterIP',
      selector: labels,
      ports: [{ name: 'gateway', port, targetPort: port, protocol: 'TCP' }],
    },
  };

  const probe = (path: string, periodSeconds: number, failureThreshold: number) => ({
    httpGet: { path, port },
    periodSeconds,
    timeoutSeconds: 5, // §8: 5 s per health probe
    failureThreshold,
  });

  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata('agent'),
    spec: {
      replicas: 1,
      // one agent, one gateway: never two pods of the same agent answering at once
      strategy: { type: 'Recreate' },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { [SPEC_HASH_ANNOTATION]: hash } },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: AGENT_UID,
            runAsGroup: AGENT_UID,
            fsGroup: AGENT_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: CONTAINER_NAME,
              image: options.image,
              ports: [{ name: 'gateway', containerPort: port, protocol: 'TCP' }],
              env: plainEnv,
              envFrom: [{ secretRef: { name } }],
              workingDir: '/home/node',
              resources,
              securityContext: {
                runAsNonRoot: true,
                runAsUser: AGENT_UID,
                allowPrivilegeEscalation: false,
                privileged: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
                seccompProfile: { type: 'RuntimeDefault' },
              },
              readinessProbe: probe('/readyz', 5, 3),
              livenessProbe: { ...probe('/healthz', 10, 6), initialDelaySeconds: 30 },
              volumeMounts: [
                { name: 'home', mountPath: '/home/node' },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          // the root filesystem is read-only: the workspace and scratch space are the pod's own, bounded
          volumes: [
            { name: 'home', emptyDir: { sizeLimit: AGENT_DISK.home } },
            { name: 'tmp', emptyDir: { sizeLimit: AGENT_DISK.tmp } },
          ],
        },
      },
    },
  };
  return { name, hash, secret, service, deployment };
}
