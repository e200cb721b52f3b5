/**
 * A local Render REST API (the subset the render driver uses), in memory: services with their
 * env vars, deploys that go build_in_progress → live after `deployMs`, restart, suspend/resume,
 * delete, logs and metrics. Every /v1 call needs `Authorization: Bearer <apiKey>`. Each service's
 * public URL points back at this server (`/svc/<id>`), whose `/healthz` answers like an agent
 * container while the service is live, so health probes can be tested end to end.
 * `down = true` makes the server drop every connection (an unreachable hosting API).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeService = {
  id: string;
  name: string;
  ownerId: string;
  type: string;
  suspended: 'suspended' | 'not_suspended';
  image: { ownerId: string; imagePath: string };
  serviceDetails: Record<string, unknown> & { url: string; plan: string };
  envVars: { key: string; value: string }[];
  deploys: { id: string; status: string; createdAt: string; finishedAt: string | null; liveAt: number }[];
  restarts: number;
  createdAt: string;
};

export type FakeRenderApi = {
  /** base URL including /v1 (what HOSTING_API_URL takes) */
  url: string;
  services: Map<string, FakeService>;
  requests: { method: string; path: string }[];
  down: boolean;
  /** services whose public /healthz answers 503 (a live unit whose gateway is silent) */
  unhealthy: Set<string>;
  close(): Promise<void>;
};

const readJson = (req: IncomingMessage) =>
  new Promise<unknown>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });

export async function startFakeRenderApi(options: { apiKey: string; deployMs?: number }): Promise<FakeRenderApi> {
  const deployMs = options.deployMs ?? 100;
  let seq = 0;
  const nextId = (prefix: string) => `${prefix}-${(++seq).toString(36).padStart(8, '0')}`;
  const api: FakeRenderApi = { url: '', services: new Map(), requests: [], down: false, unhealthy: new Set(), close: async () => {} };
  let origin = '';

  const deployStatus = (d: FakeService['deploys'][number]) => {
    if (d.status === 'build_in_progress' && Date.now() >= d.liveAt) {
      d.status = 'live';
      d.finishedAt = new Date(d.liveAt).toISOString();
    }
    return d;
  };
  const newDeploy = (s: FakeService) => {
    for (const d of s.deploys) if (deployStatus(d).status === 'live') d.status = 'deactivated';
    const d = {
      id: nextId('dep'),
      status: 'build_in_progress',
      createdAt: new Date().toISOString(),
      finishedAt: null,
      liveAt: Date.now() + deployMs,
    };
    s.deploys.unshift(d);
    return d;
  };
  const publicService = (s: FakeService) => {
    const { envVars: _e, deploys: _d, restarts: _r, ...rest } = s;
    return rest;
  };

  const send = (res: ServerResponse, status: number, body?: unknown) => {
    res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };

  const server = createServer(async (req, res) => {
    if (api.down) {
      req.socket.destroy();
      return;
    }
    const u = new URL(req.url ?? '/', origin);
    const path = u.pathname;
    const method = req.method ?? 'GET';

    // the "container" behind each service's public URL
    const svc = /^\/svc\/([^/]+)\/healthz$/.exec(path);
    if (svc) {
      const s = api.services.get(svc[1]!);
      const live =
        s && !api.unhealthy.has(s.id) && s.suspended === 'not_suspended' && s.deploys.some((d) => deployStatus(d).status === 'live');
      return live ? send(res, 200, { ok: true, status: 'live' }) : send(res, 503, { ok: false });
    }

    if (!path.startsWith('/v1/')) return send(res, 404, { message: 'not found' });
    api.requests.push({ method, path: path.slice(3) });
    if (req.headers.authorization !== `Bearer ${options.apiKey}`) return send(res, 401, { message: 'unauthorized' });
    const parts = path.slice(4).split('/');

    if (parts[0] === 'services' && parts.length === 1) {
      if (method === 'GET') {
        const name = u.searchParams.get('name');
        const owner = u.searchParams.get('ownerId');
        const list = [...api.services.values()].filter((s) => (!name || s.name === name) && (!owner || s.ownerId === owner));
        return send(
          res,
          200,
          list.map((s) => ({ service: publicService(s), cursor: s.id })),
        );
      }
      if (method === 'POST') {
        const body = (await readJson(req)) as (Partial<FakeService> & { serviceDetails?: Record<string, unknown> }) | undefined;
        if (body?.type !== 'web_service' || !body.name || !body.ownerId || !body.image?.imagePath) {
          return send(res, 400, { message: 'type web_service, name, ownerId and image.imagePath are required' });
        }
        if ([...api.services.values()].some((s) => s.name === body.name)) return send(res, 409, { message: 'name taken' });
        const id = nextId('srv');
        const s: FakeService = {
          id,
          name: body.name,
          ownerId: body.ownerId,
          type: body.type,
          suspended: 'not_suspended',
          image: body.image,
          serviceDetails: {
            ...(body.serviceDetails ?? {}),
            plan: String(body.serviceDetails?.plan ?? 'starter'),
            url: `${origin}/svc/${id}`,
          },
          envVars: body.envVars ?? [],
          deploys: [],
          restarts: 0,
          createdAt: new Date().toISOString(),
        };
        api.services.set(id, s);
        const d = newDeploy(s);
        return send(res, 201, { service: publicService(s), deployId: d.id });
      }
    }

    if (parts[0] === 'services' && parts[1]) {
      const s = api.services.get(parts[1]);
      if (!s) return send(res, 404, { message: 'service not found' });
      const action = parts[2];
      if (!action && method === 'GET') return send(res, 200, publicService(s));
      if (!action && method === 'DELETE') {
        api.services.delete(s.id);
        return send(res, 204);
      }
      if (action === 'deploys' && method === 'GET') {
        const limit = Number(u.searchParams.get('limit') ?? 20);
        return send(
          res,
          200,
          s.deploys.slice(0, limit).map((d) => {
            const { liveAt: _l, ...deploy } = deployStatus(d);
            return { deploy, cursor: d.id };
          }),
        );
      }
      if (action === 'deploys' && method === 'POST') {
        const { liveAt: _l, ...deploy } = newDeploy(s);
        return send(res, 201, deploy);
      }
      if (action === 'env-vars' && method === 'GET')
        return send(
          res,
          200,
          s.envVars.map((e) => ({ envVar: e, cursor: e.key })),
        );
      if (action === 'env-vars' && method === 'PUT') {
        const body = (await readJson(req)) as { key: string; value: string }[] | undefined;
        if (!Array.isArray(body)) return send(res, 400, { message: 'array of {key,value} required' });
        s.envVars = body;
        return send(
          res,
          200,
          body.map((e) => ({ envVar: e, cursor: e.key })),
        );
      }
      if (action === 'restart' && method === 'POST') {
        s.restarts += 1;
        return send(res, 200);
      }
      if (action === 'suspend' && method === 'POST') {
        s.suspended = 'suspended';
        return send(res, 202);
      }
      if (action === 'resume' && method === 'POST') {
        s.suspended = 'not_suspended';
        return send(res, 202);
      }
    }

    if (parts[0] === 'logs' && method === 'GET') {
      const s = api.services.get(u.searchParams.get('resource') ?? '');
      if (!u.searchParams.get('ownerId')) return send(res, 400, { message: 'ownerId required' });
      const logs = s
        ? [
            {
              id: 'l2',
              timestamp: new Date().toISOString(),
              message: 'agent runtime listening',
              labels: [
                { name: 'level', value: 'info' },
                { name: 'type', value: 'app' },
                { name: 'resource', value: s.id },
              ],
            },
            {
              id: 'l1',
              timestamp: new Date(Date.now() - 1000).toISOString(),
              message: 'image pulled',
              labels: [
                { name: 'level', value: 'warning' },
                { name: 'type', value: 'build' },
                { name: 'resource', value: s.id },
              ],
            },
          ]
        : [];
      return send(res, 200, { hasMore: false, logs });
    }

    if (parts[0] === 'metrics' && method === 'GET' && (parts[1] === 'cpu' || parts[1] === 'memory')) {
      const resource = u.searchParams.get('resource') ?? '';
      const value = parts[1] === 'cpu' ? 0.25 : 512 * 1024 * 1024;
      return send(res, 200, [
        {
          labels: [{ field: 'resource', value: resource }],
          unit: parts[1] === 'cpu' ? 'cpu' : 'bytes',
          values: [{ timestamp: new Date().toISOString(), value }],
        },
      ]);
    }

    return send(res, 404, { message: 'not found' });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.url = `${origin}/v1`;
  api.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return api;
}
