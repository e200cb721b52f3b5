/**
 * What the kubernetes driver reads back from the cluster, as the driver interface's values: the §3
 * status of a Deployment, the pod whose logs and metrics stand for the agent, log lines of
 * `pods/log?timestamps=true`, and the quantities of metrics.k8s.io PodMetrics.
 */
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { ContainerStatus, LogLine } from '../driver.contract.ts';
import { SUSPENDED_ANNOTATION } from './kubernetes-objects.rules.ts';

/**
 * §3 values from Kubernetes itself: `running` once the rollout of the current spec is done and its
 * replica passes the readiness probe (/readyz), `starting` until then (a pod of the previous spec
 * still answering does not count: the same test `kubectl rollout status` makes), `stopped` scaled
 * to 0 (`suspended` when suspend() did it), `error` when the rollout gave up
 * (progressDeadlineSeconds passed without a ready pod).
 */
export function deploymentStatus(d: V1Deployment): ContainerStatus {
  if ((d.spec?.replicas ?? 1) === 0) return d.metadata?.annotations?.[SUSPENDED_ANNOTATION] === 'true' ? 'suspended' : 'stopped';
  const progressing = d.status?.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.status === 'False' && progressing.reason === 'ProgressDeadlineExceeded') return 'error';
  const s = d.status ?? {};
  const observed = (s.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0);
  const updated = s.updatedReplicas ?? 0;
  const rolledOut = observed && updated >= 1 && (s.replicas ?? 0) <= updated;
  return rolledOut && (s.readyReplicas ?? 0) >= 1 ? 'running' : 'starting';
}

const created = (p: V1Pod) => (p.metadata?.creationTimestamp ? new Date(p.metadata.creationTimestamp).getTime() : 0);

/** The pod that stands for the agent: the newest running one that is not being deleted, else the newest. */
export function currentPod(pods: V1Pod[]): V1Pod | undefined {
  const byAge = [...pods].sort((a, b) => created(b) - created(a));
  return byAge.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp) ?? byAge[0];
}

const PINO_LEVELS: Record<number, LogLine['level']> = { 10: 'debug', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'error' };

function levelOf(value: unknown, raw: string): LogLine['level'] {
  if (typeof value === 'number') return PINO_LEVELS[value] ?? 'info';
  if (typeof value === 'string') {
    const v = value.toLowerCase();
    if (v === 'debug' || v === 'trace') return 'debug';
    if (v === 'warn' || v === 'warning') return 'warn';
    if (v === 'error' || v === 'fatal') return 'error';
    return 'info';
  }
  return /\b(error|fatal)\b/i.test(raw) ? 'error' : /\bwarn/i.test(raw) ? 'warn' : /\bdebug\b/i.test(raw) ? 'debug' : 'info';
}

/**
 * Lines of `pods/log?timestamps=true` (`<RFC 3339 nanos> <line>`), oldest first. JSON lines (pino,
 * OpenClaw's structured output) give their level and message; plain lines keep their text, their
 * level guessed from the words in it.
 */
export function parsePodLog(text: string, source: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.trim()) continue;
    const space = raw.indexOf(' ');
    const stamp = space > 0 ? Date.parse(raw.slice(0, space)) : Number.NaN;
    const rest = Number.isFinite(stamp) ? raw.slice(space + 1) : raw;
    const timestamp = Number.isFinite(stamp) ? new Date(stamp).toISOString() : new Date(0).toISOString();
    let parsed: Record<string, unknown> | undefined;
    if (rest.startsWith('{')) {
      try {
        parsed = JSON.parse(rest) as Record<string, unknown>;
      } catch {
        /* not JSON after all: shown as it is */
      }
    }
    if (parsed) {
      const message = parsed.msg ?? parsed.message;
      lines.push({
        timestamp,
        level: levelOf(parsed.level, rest),
        message: typeof message === 'string' ? message : rest,
        source: typeof parsed.source === 'string' ? parsed.source : source,
      });
    } else lines.push({ timestamp, level: levelOf(undefined, rest), message: rest, source });
  }
  return lines;
}

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** A Kubernetes quantity (`250m`, `12345678n`, `512Mi`, `1.5`) as a number; 0 when unreadable. */
export function parseQuantity(q: string | undefined): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]{0,2})$/.exec(q?.trim() ?? '');
  if (!m) return 0;
  const factor = SUFFIX[m[2]!];
  return factor === undefined ? 0 : Number(m[1]) * factor;
}

/** metrics.k8s.io/v1beta1 PodMetrics, the fields read. */
export type PodMetrics = { containers?: { name: string; usage?: { cpu?: string; memory?: string } }[] };

/** CPU in cores and memory in bytes of all the pod's containers. */
export function podUsage(m: PodMetrics | undefined): { cores: number; bytes: number } {
  let cores = 0;
  let bytes = 0;
  for (const c of m?.containers ?? []) {
    cores += parseQuantity(c.usage?.cpu);
    bytes += parseQuantity(c.usage?.memory);
  }
  return { cores, bytes };
}
