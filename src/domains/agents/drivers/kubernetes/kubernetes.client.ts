/**
 * How the kubernetes driver reaches its cluster (docs/agents.md "Kubernetes driver"): the
 * KubeConfig (a kubeconfig file, the pod's service account, or ~/.kube/config), the typed API
 * clients of `@kubernetes/client-node`, and the one place an API failure is turned into what the
 * driver's callers understand: HostingUnavailableError for an unreachable server, a 5xx, 401, 403
 * or 429 (the deploy job retries those with backoff), `undefined` for a 404 where absence is an
 * answer, and the status codes of 409s so a create can fall back to read-and-replace.
 *
 * Messages name the operation and the status only: the API server's own text (which may carry
 * internal addresses or object dumps) never reaches a job's `lastError` or an API caller.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Observable,
  type ObservableMiddleware,
  PatchStrategy,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { HostingUnavailableError } from '../driver.contract.ts';

export type ClusterOptions = {
  /** a kubeconfig file (KUBECONFIG); wins over everything else */
  kubeconfig?: string | undefined;
  /**
   * The API server as a pod sees it (KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, which
   * Kubernetes sets in every container): with no kubeconfig, the pod's service account is used.
   */
  inCluster?: { host: string; port: string } | undefined;
  /** where the service account's token and CA are mounted (default the standard path) */
  serviceAccountDir?: string;
};

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The cluster to talk to: KUBECONFIG, else the in-cluster service account (its token file is
 * re-read by the client as it is rotated), else ~/.kube/config. A missing or unreadable file
 * throws here, at start-up, rather than on the first deploy.
 */
export function loadKubeConfig(options: ClusterOptions): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig) {
    kc.loadFromFile(options.kubeconfig);
  } else if (options.inCluster) {
    const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
    const { host, port } = options.inCluster;
    // the same shape the client's own loadFromCluster() builds, from values we were given
    const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
    kc.loadFromOptions({
      clusters: [{ name: 'in-cluster', server, caFile: join(dir, 'ca.crt'), skipTLSVerify: false }],
      users: [{ name: 'service-account', authProvider: { name: 'tokenFile', config: { tokenFile: join(dir, 'token') } } }],
      contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'service-account' }],
      currentContext: 'in-cluster',
    });
  } else {
    kc.loadFromFile(join(homedir(), '.kube', 'config'));
  }
  if (!kc.getCurrentCluster()) throw new Error('kubernetes driver: the kubeconfig names no current cluster');
  return kc;
}

/** Thrown by `call` for a 409 (AlreadyExists on create, Conflict on a stale resourceVersion). */
export class KubernetesConflict extends Error {
  override name = 'KubernetesConflict';
}

export type KubernetesApis = {
  apps: AppsV1Api;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** per-call options: a timeout on every request */
  options: { middleware: ObservableMiddleware[]; middlewareMergeStrategy: 'append' };
  /** the same plus `Content-Type: application/merge-patch+json` for patch calls */
  mergePatch: { middleware: ObservableMiddleware[]; middlewareMergeStrategy: 'append' };
};

const passThrough = <T>(value: T) => new Observable(Promise.resolve(value));

export function createKubernetesApis(kc: KubeConfig, timeoutMs: number): KubernetesApis {
  // the generated client has no timeout of its own: a hung API server would hold a deploy job's lease forever
  const timeout: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return passThrough(ctx);
    },
    post: (res: ResponseContext) => passThrough(res),
  };
  // the client picks JSON Patch by default; the driver's patches are merge patches
  const mergePatch: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      ctx.setHeaderParam('Content-Type', PatchStrategy.MergePatch);
      return passThrough(ctx);
    },
    post: (res: ResponseContext) => passThrough(res),
  };
  return {
    apps: kc.makeApiClient(AppsV1Api),
    core: kc.makeApiClient(CoreV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    options: { middleware: [timeout], middlewareMergeStrategy: 'append' },
    mergePatch: { middleware: [timeout, mergePatch], middlewareMergeStrategy: 'append' },
  };
}

const UNAVAILABLE = new Set([401, 403, 408, 429]);

/**
 * Runs one API call. `notFound: 'undefined'` turns a 404 into `undefined` (reads where absence is
 * the answer, deletes of what is already gone); 409 throws KubernetesConflict; the server being
 * unreachable, slow, overloaded or refusing the platform's credentials throws
 * HostingUnavailableError; any other status (a 400 or 422: the driver sent something the cluster
 * refuses, which retrying will not fix) throws a plain Error.
 */
export async function call<T>(what: string, fn: () => Promise<T>): Promise<T>;
export async function call<T>(what: string, fn: () => Promise<T>, notFound: 'undefined'): Promise<T | undefined>;
export async function call<T>(what: string, fn: () => Promise<T>, notFound?: 'undefined'): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof ApiException)) {
      // the connection error's code (ECONNREFUSED, a TimeoutError), never its message with the server's address
      const reason = (err as { cause?: { code?: unknown } }).cause?.code ?? (err as Error).name;
      throw new HostingUnavailableError(`Kubernetes API unreachable (${what}): ${String(reason)}`);
    }
    const code = Number(err.code);
    if (code === 404 && notFound === 'undefined') return undefined;
    if (code === 409) throw new KubernetesConflict(`Kubernetes API ${what}: 409`);
    if (code >= 500 || UNAVAILABLE.has(code)) throw new HostingUnavailableError(`Kubernetes API ${what} answered ${code}`);
    throw new Error(`Kubernetes API ${what} answered ${code}`);
  }
}
