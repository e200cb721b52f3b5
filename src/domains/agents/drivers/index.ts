/**
 * The hosting driver registry (docs/architecture.md rule 4): HOSTING_DRIVER picks a factory from a
 * Record<DriverKind, Factory>, so adding a kind to DriverKind without wiring it fails to compile.
 * Every kind the configuration accepts (local, render, docker, kubernetes) is built.
 */
import type { Config } from '../../../config/env.ts';
import { createDockerDriver } from './docker.driver.ts';
import type { AgentDeploySpec, DriverKind, HostingDriver } from './driver.ts';
import { createKubernetesDriver } from './kubernetes.driver.ts';
import { createLocalDriver } from './local.driver.ts';
import { createRenderDriver } from './render.driver.ts';

export { planResources } from './agent-env.ts';
export * from './driver.ts';

export type DriverConfig = Pick<
  Config,
  'HOSTING_DRIVER' | 'HOSTING_API_URL' | 'HOSTING_API_KEY' | 'HOSTING_OWNER_ID' | 'AGENT_IMAGE' | 'AGENT_RUNTIME' | 'DATA_DIR'
> &
  Partial<
    Pick<
      Config,
      | 'AGENT_SANDBOX'
      | 'AGENT_NETWORK'
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
      network: config.AGENT_NETWORK ?? 'internet',
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
  kubernetes: (config) =>
    createKubernetesDriver({
      kubeconfig: config.KUBECONFIG,
      inCluster: config.KUBERNETES_SERVICE_HOST
        ? { host: config.KUBERNETES_SERVICE_HOST, port: config.KUBERNETES_SERVICE_PORT ?? '443' }
        : undefined,
      namespace: config.KUBERNETES_NAMESPACE ?? 'agents',
      image: config.AGENT_IMAGE,
    }),
  docker: (config) => createDockerDriver({ dockerHost: config.DOCKER_HOST ?? 'unix:///var/run/docker.sock', image: config.AGENT_IMAGE }),
};

export function createHostingDriver(config: DriverConfig, deps: DriverDeps = {}): HostingDriver {
  const factory = (DRIVER_FACTORIES as Partial<Record<string, Factory>>)[config.HOSTING_DRIVER];
  if (!factory)
    throw new Error(
      `HOSTING_DRIVER=${config.HOSTING_DRIVER} is not available yet (available: ${Object.keys(DRIVER_FACTORIES).join(', ')})`,
    );
  return factory(config, deps);
}
