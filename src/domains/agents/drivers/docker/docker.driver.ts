/**
 * The `docker` driver: one container per agent on a Docker Engine (or anything speaking its API,
 * such as `podman system service`), reached through DOCKER_HOST with dockerode. Containers are
 * named `agent-<agentId>` and labelled with the agent id, so the driver finds its units again by
 * label and keeps no state of its own; the spec hash label makes deploy idempotent.
 *
 * Calls used: GET /containers/json?filters=label, GET /containers/{id}/json, POST /containers/create,
 * POST /images/create (only when create answers 404 "No such image"), POST /containers/{id}/
 * start|stop|restart|pause|unpause, DELETE /containers/{id}, GET /containers/{id}/logs,
 * GET /containers/{id}/stats?stream=false.
 *
 * The gateway port 18789 is published on a host port the engine picks; the agent's URL is read
 * back from the inspect output, so it follows the container when a restart moves it (the watchdog
 * stores the new URL). What each container gets (user, limits, confinement) is docker-spec.rules.ts;
 * the choices are in docs/agents.md "Docker driver".
 *
 * An engine that cannot be reached (no socket, refused, timed out) or answers 5xx throws
 * HostingUnavailableError, which the deployment job retries.
 */
import Docker from 'dockerode';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type Deployment,
  type HostingDriver,
  HostingUnavailableError,
  idleStats,
} from '../driver.contract.ts';
import { logLines, publishedPort, statsOf, statusOf } from './docker-observe.service.ts';
import { AGENT_ID_LABEL, type CreateBody, containerCreateBody, GATEWAY_PORT_KEY, SPEC_HASH_LABEL, specHash } from './docker-spec.rules.ts';

export type DockerDriverOptions = {
  /** DOCKER_HOST: `unix:///path`, `tcp://host:port`, `http://host:port` or `https://host:port` */
  dockerHost: string;
  image: string;
  /**
   * Host address the gateway port is published on. Default: 127.0.0.1 when the engine is on this
   * machine (a unix socket), so agents are not exposed beyond it; 0.0.0.0 for a remote engine.
   */
  publishIp?: string;
  /** Host name in agent URLs. Default: 127.0.0.1 for a unix socket, DOCKER_HOST's host otherwise. */
  publicHost?: string;
  /** per-call socket idle timeout (default 30 s; a pull keeps the socket busy with progress) */
  timeoutMs?: number;
};

/** dockerode connection options from DOCKER_HOST, with every field set so DOCKER_* env cannot leak in. */
export function dockerConnection(dockerHost: string): { options: Docker.DockerOptions; localEngine: boolean; hostname: string } {
  if (dockerHost.startsWith('unix://')) {
    const socketPath = dockerHost.slice('unix://'.length);
    if (!socketPath.startsWith('/')) throw new Error(`DOCKER_HOST ${dockerHost}: a unix socket needs an absolute path`);
    return { options: { socketPath, host: undefined, port: undefined }, localEngine: true, hostname: '127.0.0.1' };
  }
  let url: URL;
  try {
    url = new URL(dockerHost);
  } catch {
    throw new Error(`DOCKER_HOST ${dockerHost} is not unix:///path, tcp://host:port or http(s)://host:port`);
  }
  const protocol = url.protocol === 'https:' ? 'https' : url.protocol === 'http:' || url.protocol === 'tcp:' ? 'http' : undefined;
  if (!protocol || !url.hostname) throw new Error(`DOCKER_HOST ${dockerHost} is not unix:///path, tcp://host:port or http(s)://host:port`);
  const port = url.port || (protocol === 'https' ? '2376' : '2375');
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return { options: { host: hostname, port, protocol, socketPath: undefined }, localEngine: false, hostname };
}

const statusCode = (err: unknown) => (err as { statusCode?: number } | undefined)?.statusCode;

export function createDockerDriver(options: DockerDriverOptions): HostingDriver {
  const connection = dockerConnection(options.dockerHost);
  const docker = new Docker({ ...connection.options, timeout: options.timeoutMs ?? 30_000 });
  const publishIp = options.publishIp ?? (connection.localEngine ? '127.0.0.1' : '0.0.0.0');
  const publicHost = options.publicHost ?? connection.hostname;
  const urlHost = publicHost.includes(':') ? `[${publicHost}]` : publicHost;

  /**
   * Runs one engine call; `ok` statuses count as success (already started, already gone, …).
   * Messages name the call and the status only: a deploy job's error is shown to the agent's owner,
   * and the engine's own text (socket paths, registry answers) stays in `cause` for the logs.
   */
  async function engine<T>(what: string, call: () => Promise<T>, ok: number[] = []): Promise<T | undefined> {
    try {
      return await call();
    } catch (err) {
      const code = statusCode(err);
      if (code !== undefined && ok.includes(code)) return undefined;
      if (code === undefined || code >= 500)
        throw new HostingUnavailableError(`docker engine ${what}: ${code === undefined ? 'unreachable' : `answered ${code}`}`, {
          cause: err,
        });
      throw new Error(`docker engine ${what} answered ${code}`, { cause: err });
    }
  }

  async function list(agentId: string): Promise<Docker.ContainerInfo[]> {
    const found = await engine('list containers', () =>
      docker.listContainers({ all: true, filters: { label: [`${AGENT_ID_LABEL}=${agentId}`] } }),
    );
    return found ?? [];
  }

  /** The agent's container as inspected now; undefined when there is none. */
  async function find(agentId: string): Promise<Docker.ContainerInspectInfo | undefined> {
    for (const c of await list(agentId)) {
      const info = await engine('inspect', () => docker.getContainer(c.Id).inspect(), [404]);
      if (info) return info;
    }
    return undefined;
  }

  async function existing(agentId: string): Promise<Docker.ContainerInspectInfo> {
    const info = await find(agentId);
    if (!info) throw new AgentNotDeployedError(`agent ${agentId} has no container`);
    return info;
  }

  const inspect = async (id: string) => {
    const info = await engine('inspect', () => docker.getContainer(id).inspect(), [404]);
    if (!info) throw new Error(`container ${id} disappeared while it was being started`);
    return info;
  };
  const start = (id: string) => engine('start', () => docker.getContainer(id).start(), [304]);
  const unpause = (id: string) => engine('unpause', () => docker.getContainer(id).unpause(), [409]);
  const remove = (id: string) => engine('remove', () => docker.getContainer(id).remove({ force: true, v: true }), [404]);

  const urlOf = (info: Docker.ContainerInspectInfo) => {
    const port = publishedPort(info, GATEWAY_PORT_KEY);
    return port ? `http://${urlHost}:${port}` : undefined;
  };

  function deploymentOf(info: Docker.ContainerInspectInfo): Deployment {
    const url = urlOf(info);
    if (!url) throw new Error(`container ${info.Name} runs without a published gateway port`);
    return { externalId: info.Id, url, status: statusOf(info) };
  }

  /**
   * Pulls the image. The engine answers 200 at once and streams progress as JSON lines; a failed
   * pull is a last line with `error` (read here rather than with dockerode's followProgress, which
   * throws out of its stream handler on a line that is not JSON).
   */
  async function pull(image: string) {
    const stream = (await engine('pull', () => docker.pull(image))) as NodeJS.ReadableStream;
    const text = await new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(Buffer.from(c)));
      stream.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      stream.on('error', (err: Error) =>
        reject(new HostingUnavailableError('docker engine pull: the progress stream broke', { cause: err })),
      );
    });
    for (const line of text.split('\n')) {
      let event: { error?: string; errorDetail?: { message?: string } } | undefined;
      try {
        event = JSON.parse(line) as typeof event;
      } catch {
        continue; // a blank or torn line
      }
      if (event?.error || event?.errorDetail)
        throw new Error('docker engine could not pull the agent image', {
          cause: new Error(`${image}: ${event.errorDetail?.message ?? event.error}`),
        });
    }
  }

  async function create(body: CreateBody): Promise<string> {
    const attempt = () => engine('create', () => docker.createContainer(body), [404]);
    let created = await attempt();
    if (!created) {
      // 404 from create means the image is not on the engine yet ("No such image")
      await pull(body.Image!);
      created = await attempt();
      if (!created) throw new Error('docker engine has no agent image after pulling it');
    }
    return created.id;
  }

  return {
    kind: 'docker',

    async deploy(spec: AgentDeploySpec) {
      const body = containerCreateBody(spec, { image: options.image, publishIp });
      const hash = specHash(body);
      const found = await list(spec.agentId);
      for (const c of found) {
        const info = await engine('inspect', () => docker.getContainer(c.Id).inspect(), [404]);
        if (!info) continue;
        const adoptable = info.Config.Labels?.[SPEC_HASH_LABEL] === hash && !['dead', 'removing'].includes(info.State.Status);
        if (adoptable) {
          if (info.State.Paused) await unpause(info.Id);
          else if (!info.State.Running && !info.State.Restarting) await start(info.Id);
          else return deploymentOf(info);
          return deploymentOf(await inspect(info.Id));
        }
        await remove(info.Id);
      }
      const id = await create({ ...body, Labels: { ...body.Labels, [SPEC_HASH_LABEL]: hash } });
      await start(id);
      return deploymentOf(await inspect(id));
    },

    async status(agentId: string) {
      const info = await find(agentId);
      if (!info) return { status: 'not_found' as const };
      const url = urlOf(info);
      return url ? { status: statusOf(info), url } : { status: statusOf(info) };
    },

    async restart(agentId: string) {
      const info = await existing(agentId);
      // the engine refuses to restart a paused container
      if (info.State.Paused) await unpause(info.Id);
      await engine('restart', () => docker.getContainer(info.Id).restart({ t: 10 }));
    },

    async stop(agentId: string) {
      const info = await existing(agentId);
      if (info.State.Paused) await unpause(info.Id);
      await engine('stop', () => docker.getContainer(info.Id).stop({ t: 10 }), [304]);
    },

    /**
     * Scale to zero (docs/agents.md "Idle agents sleep"): the container is stopped, so nothing of it
     * runs and its memory is freed (a pause would keep every page); its filesystem stays, and
     * resume() starts it again. It then reads `stopped`: the platform's record says `suspended`.
     */
    async suspend(agentId: string) {
      const info = await existing(agentId);
      if (info.State.Paused)
        await unpause(info.Id); // paused by an earlier version: the engine stops no paused container
      else if (!info.State.Running) return;
      await engine('stop', () => docker.getContainer(info.Id).stop({ t: 10 }), [304]);
    },

    async resume(agentId: string) {
      const info = await existing(agentId);
      if (info.State.Paused) await unpause(info.Id);
      else if (!info.State.Running) await start(info.Id);
    },

    async delete(agentId: string) {
      for (const c of await list(agentId)) await remove(c.Id);
    },

    async logs(agentId: string, opts: { limit: number; level?: string }) {
      const limit = Math.max(0, Math.floor(opts.limit));
      const info = await find(agentId);
      if (!info || limit === 0) return [];
      const level = opts.level?.toLowerCase();
      // the engine cannot filter by level: read further back when only one level is wanted
      const tail = level ? Math.min(10_000, limit * 20) : limit;
      const body = await engine(
        'logs',
        () => docker.getContainer(info.Id).logs({ stdout: true, stderr: true, timestamps: true, tail, follow: false }),
        [404],
      );
      if (!body) return [];
      const lines = logLines(Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)));
      return (level ? lines.filter((l) => l.level === level) : lines).slice(-limit);
    },

    async stats(agentId: string) {
      const info = await find(agentId);
      if (!info) return idleStats('not_found');
      const status = statusOf(info);
      if (!info.State.Running) return idleStats(status);
      const sample = await engine('stats', () => docker.getContainer(info.Id).stats({ stream: false }), [404, 409]);
      return sample ? statsOf(sample, status, info.State.StartedAt) : idleStats(status);
    },

    async shutdown() {
      // containers run on the engine, not in this process; the engine restarts them (unless-stopped)
    },
  };
}
