/**
 * The `render` driver: one Render web service per agent, created from AGENT_IMAGE through the
 * Render REST API (HOSTING_API_URL, Bearer HOSTING_API_KEY). The service is named
 * `agent-<agentId>`, so the driver finds its units again by name and keeps no state of its own.
 *
 * Calls used: POST /services, GET /services?name=, GET/PUT /services/{id}/env-vars,
 * POST/GET /services/{id}/deploys, POST /services/{id}/restart|suspend|resume,
 * DELETE /services/{id}, GET /logs, GET /metrics/cpu|memory.
 *
 * Best effort, because the API does not offer them: `pids` (always 0) and per-service network
 * counters (0); cpu and memory are the latest points of Render's metrics (0 when the workspace
 * has no metrics access); uptime is counted from the live deploy's finish time; logs need the
 * owner id (Render's log API is per workspace). The runtime's message counters are not reachable
 * without the agent's token, so they are absent here.
 *
 * An unreachable API, a 5xx, a rejected key or no key at all throw HostingUnavailableError.
 */
import { LIMITS } from '../../../../config/limits.ts';
import { agentEnvironment, planResources } from '../agent-env.rules.ts';
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type ContainerStatus,
  type HostingDriver,
  HostingUnavailableError,
  idleStats,
  type LogLine,
} from '../driver.contract.ts';

export type RenderDriverOptions = {
  apiUrl: string;
  apiKey: string | undefined;
  ownerId: string | undefined;
  image: string;
  /** Render region for new services (default oregon) */
  region?: string;
  /** per-call timeout (default 15 s) */
  timeoutMs?: number;
};

type RenderService = {
  id: string;
  name: string;
  ownerId?: string;
  suspended?: 'suspended' | 'not_suspended' | string;
  serviceDetails?: { url?: string; plan?: string };
};
type RenderDeploy = { id: string; status: string; createdAt?: string; finishedAt?: string | null };

const serviceName = (agentId: string) => `agent-${agentId}`;

const IN_PROGRESS = new Set(['created', 'queued', 'build_in_progress', 'update_in_progress', 'pre_deploy_in_progress']);
const FAILED = new Set(['build_failed', 'update_failed', 'pre_deploy_failed', 'canceled']);

/** Render lists wrap each item with a cursor: `[{ service: {...}, cursor }]`. */
const unwrap = <T>(items: unknown, key: string): T[] =>
  Array.isArray(items) ? items.map((i) => ((i as Record<string, unknown>)[key] ?? i) as T) : [];

export function createRenderDriver(options: RenderDriverOptions): HostingDriver {
  const base = options.apiUrl.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 15_000;

  async function api<T>(method: string, path: string, body?: unknown, okStatuses: number[] = []): Promise<{ status: number; data: T }> {
    if (!options.apiKey)
      throw new HostingUnavailableError('HOSTING_API_KEY is not set: the render driver cannot reach the hosting platform');
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new HostingUnavailableError(`hosting API unreachable: ${(err as Error).message}`);
    }
    const text = await res.text();
    let data: unknown;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = text;
    }
    if (res.ok || okStatuses.includes(res.status)) return { status: res.status, data: data as T };
    if (res.status >= 500 || res.status === 401 || res.status === 403 || res.status === 429) {
      throw new HostingUnavailableError(`hosting API ${method} ${path} answered ${res.status}`);
    }
    const message = (data as { message?: string } | undefined)?.message ?? text.slice(0, 200);
    throw new Error(`hosting API ${method} ${path} answered ${res.status}: ${message}`);
  }

  async function findService(agentId: string): Promise<RenderService | undefined> {
    const q = new URLSearchParams({ name: serviceName(agentId), limit: '20' });
    if (options.ownerId) q.set('ownerId', options.ownerId);
    const { data } = await api<unknown>('GET', `/services?${q}`);
    return unwrap<RenderService>(data, 'service').find((s) => s.name === serviceName(agentId));
  }

  async function requireService(agentId: string): Promise<RenderService> {
    const service = await findService(agentId);
    if (!service) throw new AgentNotDeployedError(`agent ${agentId} has no hosting service`);
    return service;
  }

  async function latestDeploy(serviceId: string): Promise<RenderDeploy | undefined> {
    const { data } = await api<unknown>('GET', `/services/${encodeURIComponent(serviceId)}/deploys?limit=1`);
    return unwrap<RenderDeploy>(data, 'deploy')[0];
  }

  const envVars = (spec: AgentDeploySpec) => {
    // the gateway URL is the one the container's own tools use to reach their gateway
    const env = agentEnvironment(spec, { gatewayPort: LIMITS.agentGatewayPort, gatewayUrl: `http://127.0.0.1:${LIMITS.agentGatewayPort}` });
    // the gateway listens on all interfaces inside the container (§8 bind lan)
    env.AGENT_HOST = '0.0.0.0';
    env.HOME = '/home/node';
    env.NODE_COMPILE_CACHE = '/var/tmp/openclaw-compile-cache';
    return Object.entries(env).map(([key, value]) => ({ key, value }));
  };

  function statusOf(service: RenderService, deploy: RenderDeploy | undefined): ContainerStatus {
    if (service.suspended === 'suspended') return 'suspended';
    if (!deploy) return 'starting';
    if (deploy.status === 'live') return 'running';
    if (IN_PROGRESS.has(deploy.status)) return 'starting';
    if (FAILED.has(deploy.status)) return 'error';
    if (deploy.status === 'deactivated') return 'stopped';
    return 'error';
  }

  const serviceUrl = (service: RenderService) => service.serviceDetails?.url ?? `https://${service.name}.onrender.com`;

  return {
    kind: 'render',

    async deploy(spec: AgentDeploySpec) {
      const resources = planResources(spec.plan);
      const existing = await findService(spec.agentId);
      if (existing) {
        const id = encodeURIComponent(existing.id);
        const wanted = envVars(spec);
        const { data } = await api<unknown>('GET', `/services/${id}/env-vars?limit=100`);
        const current = new Map(unwrap<{ key: string; value: string }>(data, 'envVar').map((e) => [e.key, e.value]));
        const same = wanted.length === current.size && wanted.every((e) => current.get(e.key) === e.value);
        if (existing.suspended === 'suspended') await api('POST', `/services/${id}/resume`);
        const deploy = await latestDeploy(existing.id);
        if (same && deploy && !FAILED.has(deploy.status) && deploy.status !== 'deactivated') {
          return {
            externalId: existing.id,
            url: serviceUrl(existing),
            status: statusOf({ ...existing, suspended: 'not_suspended' }, deploy),
          };
        }
        if (!same) await api('PUT', `/services/${id}/env-vars`, wanted);
        await api('POST', `/services/${id}/deploys`, { clearCache: 'do_not_clear' });
        return { externalId: existing.id, url: serviceUrl(existing), status: 'starting' };
      }
      if (!options.ownerId) throw new HostingUnavailableError('HOSTING_OWNER_ID is not set: the render driver cannot create services');
      const { data } = await api<{ service?: RenderService } & Partial<RenderService>>('POST', '/services', {
        type: 'web_service',
        name: serviceName(spec.agentId),
        ownerId: options.ownerId,
        autoDeploy: 'no',
        image: { ownerId: options.ownerId, imagePath: options.image },
        envVars: envVars(spec),
        serviceDetails: {
          runtime: 'image',
          plan: resources.renderPlan,
          region: options.region ?? 'oregon',
          numInstances: 1,
          healthCheckPath: '/healthz',
          envSpecificDetails: {},
        },
      });
      const service = (data.service ?? data) as RenderService;
      return { externalId: service.id, url: serviceUrl(service), status: 'starting' };
    },

    async status(agentId: string) {
      const service = await findService(agentId);
      if (!service) return { status: 'not_found' as const };
      const deploy = service.suspended === 'suspended' ? undefined : await latestDeploy(service.id);
      return { status: statusOf(service, deploy), url: serviceUrl(service) };
    },

    async restart(agentId: string) {
      const service = await requireService(agentId);
      await api('POST', `/services/${encodeURIComponent(service.id)}/restart`);
    },

    async suspend(agentId: string) {
      const service = await requireService(agentId);
      if (service.suspended === 'suspended') return;
      await api('POST', `/services/${encodeURIComponent(service.id)}/suspend`);
    },

    async resume(agentId: string) {
      const service = await requireService(agentId);
      if (service.suspended !== 'suspended') return;
      await api('POST', `/services/${encodeURIComponent(service.id)}/resume`);
    },

    async delete(agentId: string) {
      const service = await findService(agentId);
      if (!service) return;
      await api('DELETE', `/services/${encodeURIComponent(service.id)}`, undefined, [404]);
    },

    async logs(agentId: string, opts: { limit: number; level?: string }) {
      const service = await findService(agentId);
      if (!service || !options.ownerId) return [];
      const q = new URLSearchParams({
        ownerId: options.ownerId,
        resource: service.id,
        limit: String(Math.max(1, Math.min(100, opts.limit))),
        direction: 'backward',
      });
      if (opts.level) q.set('level', opts.level);
      const { data } = await api<{ logs?: { timestamp: string; message: string; labels?: { name: string; value: string }[] }[] }>(
        'GET',
        `/logs?${q}`,
      );
      const lines = (data?.logs ?? []).map((l) => {
        const label = (name: string) => l.labels?.find((x) => x.name === name)?.value;
        const level = (label('level') ?? 'info').toLowerCase();
        return {
          timestamp: l.timestamp,
          level: (['debug', 'info', 'warn', 'error'].includes(level) ? level : level === 'warning' ? 'warn' : 'info') as LogLine['level'],
          message: l.message,
          source: label('type') ?? 'app',
        };
      });
      const filtered = opts.level ? lines.filter((l) => l.level === opts.level) : lines;
      // the API answers newest first with direction=backward; callers get oldest → newest like the local driver
      return filtered.slice(0, opts.limit).reverse();
    },

    async stats(agentId: string) {
      const service = await findService(agentId);
      if (!service) return idleStats('not_found');
      const deploy = service.suspended === 'suspended' ? undefined : await latestDeploy(service.id);
      const status = statusOf(service, deploy);
      const latest = async (metric: string): Promise<number> => {
        try {
          const q = new URLSearchParams({ resource: service.id });
          const { data } = await api<{ values?: { value: number }[] }[]>('GET', `/metrics/${metric}?${q}`);
          const values = Array.isArray(data) ? data.flatMap((s) => s.values ?? []) : [];
          return values.length ? Number(values[values.length - 1]!.value) || 0 : 0;
        } catch (err) {
          if (err instanceof HostingUnavailableError) throw err;
          return 0; // metrics not offered for this workspace/plan
        }
      };
      const [cpu, memory] = await Promise.all([latest('cpu'), latest('memory')]);
      const resources = planResources(service.serviceDetails?.plan ?? 'standard');
      const since = deploy?.status === 'live' && deploy.finishedAt ? Date.parse(deploy.finishedAt) : NaN;
      return {
        ...idleStats(status),
        // Render reports CPU as a fraction of one core
        cpu: Math.round(cpu * 1000) / 10,
        memory,
        memoryPercent: Math.round((memory / (resources.memoryMb * 1024 * 1024)) * 10_000) / 100,
        uptime: Number.isFinite(since) ? Math.max(0, Math.round((Date.now() - since) / 1000)) : 0,
      };
    },

    async shutdown() {
      // services run on the hosting platform, not in this process
    },
  };
}
