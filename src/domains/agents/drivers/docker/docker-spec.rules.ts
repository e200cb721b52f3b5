/**
 * What the docker driver asks the Engine to create for one agent (POST /containers/create): the
 * container's name and labels, its environment (the agent's own credentials only, agent-env.rules.ts),
 * the §4.7 plan's memory and CPU, and the confinement every agent container gets. The body's
 * SHA-256 is stored as a label, so a later deploy can tell "same spec: adopt" from "changed
 * spec: replace" by reading the container back, without state of its own (docs/agents.md
 * "Docker driver").
 */
import { createHash } from 'node:crypto';
import type { ContainerCreateOptions } from 'dockerode';
import { LIMITS } from '../../../../config/limits.ts';
import { agentEnvironment, planResources } from '../agent-env.rules.ts';
import type { AgentDeploySpec } from '../driver.contract.ts';

export const AGENT_ID_LABEL = 'agent-platform/agent-id';
export const SPEC_HASH_LABEL = 'agent-platform/spec-hash';
const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
const MANAGED_BY = 'agent-platform';

/**
 * The uid/gid agents run as: `node` in the official Node images OpenClaw's image is built on, so
 * files the image ships under /home/node stay readable. Never 0, whatever the image declares.
 */
const AGENT_UID = 1000;

/** Tasks per container: a fork bomb in a user's tool stops here, not at the machine's limit. */
const AGENT_PIDS_LIMIT = 512;

export const GATEWAY_PORT_KEY = `${LIMITS.agentGatewayPort}/tcp`;

const SECOND_NS = 1_000_000_000;

/**
 * The image's own Node answers the probe (agent images ship node, not necessarily curl). Numbers
 * follow §8: a 5 s probe timeout, and a 60 s start period like the backend's wait-for-healthy.
 */
const HEALTHCHECK_SCRIPT = `fetch('http://127.0.0.1:${LIMITS.agentGatewayPort}/healthz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`;

/** Docker names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*; agent ids are UUIDs, anything else is folded. */
const containerName = (agentId: string) => `agent-${agentId.replace(/[^a-zA-Z0-9_.-]/g, '-')}`;

export type CreateBody = ContainerCreateOptions & { name: string };

/**
 * The create body for one agent. `publishIp` is the host address the gateway port is published
 * on (the engine picks the port); see docker.driver.ts for how it is chosen.
 */
export function containerCreateBody(spec: AgentDeploySpec, options: { image: string; publishIp: string }): CreateBody {
  const resources = planResources(spec.plan);
  const env = agentEnvironment(spec, {
    gatewayPort: LIMITS.agentGatewayPort,
    gatewayUrl: `http://127.0.0.1:${LIMITS.agentGatewayPort}`,
  });
  // the gateway listens on all interfaces inside the container (§8 bind lan); the rootfs is
  // read-only, so everything the runtime writes goes to the tmpfs mounts below
  env.AGENT_HOST = '0.0.0.0';
  env.HOME = '/home/node';
  env.NODE_COMPILE_CACHE = '/var/tmp/openclaw-compile-cache';
  const memory = resources.memoryMb * 1024 * 1024;
  // mode 1777 rather than uid=: Podman refuses tmpfs uid/gid options, and the agent's user is
  // the only one running in the container
  const tmpfs = (size: string) => `rw,nosuid,nodev,size=${size},mode=1777`;
  return {
    name: containerName(spec.agentId),
    Image: options.image,
    User: `${AGENT_UID}:${AGENT_UID}`,
    WorkingDir: '/home/node',
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: { [AGENT_ID_LABEL]: spec.agentId, [MANAGED_BY_LABEL]: MANAGED_BY },
    ExposedPorts: { [GATEWAY_PORT_KEY]: {} },
    Healthcheck: {
      Test: ['CMD', 'node', '-e', HEALTHCHECK_SCRIPT],
      Interval: 10 * SECOND_NS,
      Timeout: 5 * SECOND_NS,
      Retries: 3,
      StartPeriod: 60 * SECOND_NS,
    },
    StopTimeout: 10,
    HostConfig: {
      Memory: memory,
      // no swap beyond the plan's memory
      MemorySwap: memory,
      NanoCpus: Math.round(resources.cpus * SECOND_NS),
      PidsLimit: AGENT_PIDS_LIMIT,
      ReadonlyRootfs: true,
      // tmpfs pages count against the container's memory limit, so these sizes are ceilings
      Tmpfs: {
        '/home/node': tmpfs(`${Math.floor(resources.memoryMb / 2)}m`),
        '/tmp': tmpfs('256m'),
        '/var/tmp': tmpfs('256m'),
      },
      // an init as PID 1 reaps the zombies of the agent's tools and passes SIGTERM on, so a stop
      // ends the runtime at once instead of after the kill timeout
      Init: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      RestartPolicy: { Name: 'unless-stopped', MaximumRetryCount: 0 },
      PortBindings: { [GATEWAY_PORT_KEY]: [{ HostIp: options.publishIp, HostPort: '' }] },
    },
  };
}

/** The label value that identifies a spec: the create body with the hash label not yet in it. */
export function specHash(body: CreateBody): string {
  return createHash('sha256').update(JSON.stringify(body)).digest('hex');
}
