/**
 * The hosting driver registry (docs/architecture.md rule 4): HOSTING_DRIVER picks a factory from a
 * Record<DriverKind, Factory>, so adding a kind to DriverKind without wiring it fails to compile.
 * Every kind the configuration accepts (local, render, docker, kubernetes) is built.
 */
import type { Config } from '../../../config/env.ts';
import { type AgentDeploySpec, AgentNotDeployedError, type DriverKind, type HostingDriver } from './driver.contract.ts';
import { createLocalDriver } from './local/local.driver.ts';
import { createRenderDriver } from './render/render.driver.ts';

export { planResources } from './agent-env.rules.ts';
export * from './driver.contract.ts';

export type DriverConfig = Pick<
  Config,
  'HOSTING_DRIVER' | 'HOSTING_API_URL' | 'HOSTING_API_KEY' | 'HOSTING_OWNER_ID' | 'AGENT_IMAGE' | 'AGENT_RUNTIME' | 'DATA_DIR'
> &
  Partial<
    Pick<
      Config,
      | 'AGENT_SANDBOX'
      | 'AGENT_UID_BASE'
      | 'AGENT_NETWORK'
      | 'AGENT_DISK_QUOTA_MB'
      | 'KUBECONFIG'
      | 'KUBERNETES_NAMESPACE'
      | 'KUBERNETES_SERVICE_HOST'
      | 'KUBERNETES_SERVICE_PORT'
      | 'DOCKER_HOST'
    >
  >;

export type DriverDeps = {
  /** local driver: where restart/resume find a deploy spec after a platform restart (the agents domain's stored agent) */
  loadSpec?: (agentId: string) => Promise<AgentDeploySpec | undefined>;
  /** local driver: extra environment for every agent (tests) */
  extraEnv?: Record<string, string>;
  /** local driver: SIGTERM → SIGKILL grace period */
  stopGraceMs?: number;
  /** local driver: where it says which sandbox protections are active */
  log?: (level: 'info' | 'warn', message: string) => void;
  /** local driver, tests: a script the built-in runtime runs instead of src/runtime/main.ts */
  runtimeEntry?: string;
};

type Factory = (config: DriverConfig, deps: DriverDeps) => HostingDriver;

export const DRIVER_FACTORIES: Record<DriverKind, Factory> = {
  local: (config, deps) =>
    createLocalDriver({
      dataDir: config.DATA_DIR,
      runtime: config.AGENT_RUNTIME,
      loadSpec: deps.loadSpec,
      extraEnv: deps.extraEnv,
      stopGraceMs: deps.stopGraceMs,
      sandbox: config.AGENT_SANDBOX ?? 'auto',
      uidBase: config.AGENT_UID_BASE,
      network: config.AGENT_NETWORK ?? 'internet',
      diskQuotaMb: config.AGENT_DISK_QUOTA_MB,
      log: deps.log,
      runtimeEntry: deps.runtimeEntry,
    }),
  render: (config) =>
    createRenderDriver({
      apiUrl: config.HOSTING_API_URL,
      apiKey: config.HOSTING_API_KEY,
      ownerId: config.HOSTING_OWNER_ID,
      image: config.AGENT_IMAGE,
    }),
  // the container drivers' modules load only when chosen: their SDKs are heavy to hold for nothing
  // (@kubernetes/client-node adds ~90 MB resident, dockerode ~30 MB; docs/benchmarks.md)
  kubernetes: (config) =>
    lazyDriver('kubernetes', async () =>
      (await import('./kubernetes/kubernetes.driver.ts')).createKubernetesDriver({
        kubeconfig: config.KUBECONFIG,
        inCluster: config.KUBERNETES_SERVICE_HOST
          ? { host: config.KUBERNETES_SERVICE_HOST, port: config.KUBERNETES_SERVICE_PORT ?? '443' }
          : undefined,
        namespace: config.KUBERNETES_NAMESPACE ?? 'agents',
        image: config.AGENT_IMAGE,
      }),
    ),
  docker: (config) =>
    lazyDriver('docker', async () =>
      (await import('./docker/docker.driver.ts')).createDockerDriver({
        dockerHost: config.DOCKER_HOST ?? 'unix:///var/run/docker.sock',
        image: config.AGENT_IMAGE,
      }),
    ),
};

export function createHostingDriver(config: DriverConfig, deps: DriverDeps = {}): HostingDriver {
  const factory = (DRIVER_FACTORIES as Partial<Record<string, Factory>>)[config.HOSTING_DRIVER];
  if (!factory)
    throw new Error(
      `HOSTING_DRIVER=${config.HOSTING_DRIVER} is not available yet (available: ${Object.keys(DRIVER_FACTORIES).join(', ')})`,
    );
  return factory(config, deps);
}

/**
 * A driver whose module is imported when it is created (at start, only for the kind chosen) and
 * whose calls wait for it. A module or settings error rejects ready() (the backend awaits it before
 * its workers start) and every call.
 */
function lazyDriver(kind: DriverKind, load: () => Promise<HostingDriver>): HostingDriver {
  const loaded = load();
  loaded.catch(() => {}); // reported by ready() and by each call, not as an unhandled rejection
  return {
    kind,
    ready: async () => {
      await (await loaded).ready?.();
    },
    deploy: async (spec) => (await loaded).deploy(spec),
    status: async (agentId) => (await loaded).status(agentId),
    restart: async (agentId) => (await loaded).restart(agentId),
    suspend: async (agentId) => (await loaded).suspend(agentId),
    stop: async (agentId) => {
      const driver = await loaded;
      if (!driver.stop) throw new AgentNotDeployedError(`the ${kind} driver cannot stop an agent without replacing it`);
      await driver.stop(agentId);
    },
    resume: async (agentId) => (await loaded).resume(agentId),
    delete: async (agentId) => (await loaded).delete(agentId),
    logs: async (agentId, options) => (await loaded).logs(agentId, options),
    stats: async (agentId) => (await loaded).stats(agentId),
    shutdown: async () => {
      await (await loaded.catch(() => undefined))?.shutdown();
    },
  };
}
