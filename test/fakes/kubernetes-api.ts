/**
 * A local Kubernetes API server (the subset the kubernetes driver uses), in memory: apps/v1
 * deployments (+ /scale), v1 services, secrets, pods (list, /log) and metrics.k8s.io PodMetrics,
 * with the REST shapes, Status errors (404 NotFound, 409 AlreadyExists / Conflict on a stale
 * resourceVersion, 415 for a patch type it does not take, 422 for an immutable clusterIP) and
 * bearer-token authentication of a real API server. A tiny controller plays the Deployment and
 * kubelet: each Deployment gets `replicas` pods of its current template (Recreate), a pod turns
 * Ready `readyMs` after it is made, and a template change (rollout restart) replaces the pods.
 * `origin/svc/<ns>/<service>/healthz` answers like the agent's gateway while a ready pod backs the
 * Service, so the platform's health waits can run against it.
 *
 * Faults: `down` drops every connection; `fail()` answers the next matching request(s) with a
 * status (optionally after applying it, a lost answer) or never answers (`hang`).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

type Obj = Record<string, any>;
export type FakePod = Obj & { log: string[]; readyAt: number; owner: string; templateKey: string };
type Resource = 'deployments' | 'services' | 'secrets';
export type Fault = {
  method?: string;
  resource: string;
  sub?: string;
  /** matching requests let through first */
  skip?: number;
  times?: number;
  status: number | 'hang';
  /** apply the request, then answer `status` (the client never learns it succeeded) */
  commit?: boolean;
};

export type FakeKubernetesApi = {
  origin: string;
  token: string;
  store: Record<Resource, Map<string, Obj>>;
  pods: Map<string, FakePod>;
  requests: { method: string; path: string; contentType?: string | undefined; status: number }[];
  down: boolean;
  metricsAvailable: boolean;
  readyMs: number;
  /** pod usage served by metrics.k8s.io */
  usage: { cpu: string; memory: string };
  fail(fault: Fault): void;
  /** a kubeconfig (JSON is YAML) whose current context is this server with the bearer token */
  kubeconfig(namespace: string): string;
  /** live pods of an agent (by its agent-id label value) */
  podsOf(agentLabel: string): FakePod[];
  close(): Promise<void>;
};

const DNS_1123 = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const KINDS: Record<Resource, { kind: string; apiVersion: string }> = {
  deployments: { kind: 'Deployment', apiVersion: 'apps/v1' },
  services: { kind: 'Service', apiVersion: 'v1' },
  secrets: { kind: 'Secret', apiVersion: 'v1' },
};

const status = (code: number, reason: string, message: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message,
  reason,
  code,
});

/** RFC 7386 JSON merge patch (what the driver's patches are; strategic merge is the same for maps). */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Obj = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Obj) } : {};
  for (const [k, v] of Object.entries(patch as Obj)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const matches = (labels: Obj | undefined, selector: string | null) =>
  !selector ||
  selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return labels?.[k!] === v;
  });

export async function startFakeKubernetesApi(options: { readyMs?: number } = {}): Promise<FakeKubernetesApi> {
  let rv = 100;
  const nextRv = () => String(++rv);
  const faults: (Fault & { seen: number; used: number })[] = [];
  const hung = new Set<ServerResponse>();
  const api: FakeKubernetesApi = {
    origin: '',
    token: randomBytes(16).toString('hex'),
    store: { deployments: new Map(), services: new Map(), secrets: new Map() },
    pods: new Map(),
    requests: [],
    down: false,
    metricsAvailable: true,
    readyMs: options.readyMs ?? 100,
    usage: { cpu: '250000000n', memory: '512Mi' },
    fail: (f) => faults.push({ ...f, seen: 0, used: 0 }),
    kubeconfig: (namespace) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        // plain HTTP on loopback: the client only allows it with TLS verification switched off
        clusters: [{ name: 'fake', cluster: { server: api.origin, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'platform', user: { token: api.token } }],
        contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'platform', namespace } }],
        'current-context': 'fake',
      }),
    podsOf: (label) => [...api.pods.values()].filter((p) => p.metadata.labels?.['agent-platform/agent-id'] === label),
    close: async () => {},
  };

  const podView = (p: FakePod) => {
    const ready = Date.now() >= p.readyAt;
    const { log: _l, readyAt: _r, owner: _o, templateKey: _t, ...pod } = p;
    return {
      ...pod,
      status: {
        phase: ready ? 'Running' : 'Pending',
        startTime: pod.metadata.creationTimestamp,
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
        containerStatuses: (pod.spec.containers as Obj[]).map((c) => ({
          name: c.name,
          ready,
          state: ready ? { running: { startedAt: new Date(p.readyAt).toISOString() } } : { waiting: { reason: 'ContainerCreating' } },
        })),
      },
    };
  };

  /** The Deployment controller and kubelet in one: pods follow replicas and the template. */
  function reconcile() {
    for (const [key, d] of api.store.deployments) {
      const templateKey = JSON.stringify(d.spec.template);
      const own = [...api.pods.values()].filter((p) => p.owner === key);
      for (const p of own) if (p.templateKey !== templateKey) api.pods.delete(p.metadata.name); // Recreate
      let live = own.filter((p) => p.templateKey === templateKey);
      const replicas = d.spec.replicas ?? 1;
      while (live.length > replicas) api.pods.delete(live.pop()!.metadata.name);
      while (live.length < replicas) {
        const name = `${d.metadata.name}-${randomBytes(4).toString('hex').slice(0, 8)}-${randomBytes(3).toString('hex').slice(0, 5)}`;
        const pod: FakePod = {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name,
            namespace: d.metadata.namespace,
            uid: randomUUID(),
            labels: { ...d.spec.template.metadata?.labels },
            creationTimestamp: new Date().toISOString(),
          },
          spec: structuredClone(d.spec.template.spec),
          log: [],
          readyAt: Date.now() + api.readyMs,
          owner: key,
          templateKey,
        };
        pod.log.push(
          `${new Date().toISOString()} {"level":30,"time":${Date.now()},"msg":"gateway listening on 18789","source":"runtime"}`,
          `${new Date().toISOString()} WARN model base URL answered slowly`,
        );
        api.pods.set(name, pod);
        live = [...live, pod];
      }
      const ready = live.filter((p) => Date.now() >= p.readyAt).length;
      d.status = {
        observedGeneration: d.metadata.generation,
        replicas: live.length,
        updatedReplicas: live.length,
        readyReplicas: ready || undefined,
      };
    }
  }

  const send = (res: ServerResponse, code: number, body: unknown, contentType = 'application/json') => {
    res.writeHead(code, { 'content-type': contentType });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };
  const readJson = async (req: IncomingMessage): Promise<Obj | undefined> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Obj) : undefined;
  };

  /** Stores `body` as the new state of an object: server-set fields, Secret stringData folded into data. */
  function admit(resource: Resource, ns: string, body: Obj, previous?: Obj): Obj {
    const obj = structuredClone(body);
    obj.apiVersion = KINDS[resource].apiVersion;
    obj.kind = KINDS[resource].kind;
    obj.metadata = {
      ...obj.metadata,
      namespace: ns,
      uid: previous?.metadata.uid ?? randomUUID(),
      creationTimestamp: previous?.metadata.creationTimestamp ?? new Date().toISOString(),
      resourceVersion: nextRv(),
    };
    if (resource === 'secrets' && obj.stringData) {
      obj.data = { ...obj.data };
      for (const [k, v] of Object.entries(obj.stringData as Record<string, string>)) obj.data[k] = Buffer.from(v).toString('base64');
      delete obj.stringData;
    }
    if (resource === 'services') obj.spec = { ...obj.spec, clusterIP: previous?.spec.clusterIP ?? `10.96.${rv % 250}.${(rv * 7) % 250}` };
    if (resource === 'deployments') {
      const changed = !previous || JSON.stringify(previous.spec) !== JSON.stringify(obj.spec);
      obj.metadata.generation = (previous?.metadata.generation ?? 0) + (changed ? 1 : 0);
    }
    return obj;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, u: URL): Promise<[number, unknown, string?]> {
    const method = req.method ?? 'GET';
    const svc = /^\/svc\/([^/]+)\/([^/]+)\/healthz$/.exec(u.pathname);
    if (svc) {
      const s = api.store.services.get(`${svc[1]}/${svc[2]}`);
      const backed =
        s &&
        [...api.pods.values()].some(
          (p) =>
            matches(
              p.metadata.labels,
              Object.entries(s.spec.selector ?? {})
                .map(([k, v]) => `${k}=${v}`)
                .join(','),
            ) && Date.now() >= p.readyAt,
        );
      return backed ? [200, { ok: true, status: 'live' }] : [503, { ok: false }];
    }
    if (req.headers.authorization !== `Bearer ${api.token}`) return [401, status(401, 'Unauthorized', 'Unauthorized')];
    const m =
      /^\/(?:api\/v1|apis\/apps\/v1|apis\/metrics\.k8s\.io\/v1beta1)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/.exec(
        u.pathname,
      );
    if (!m) return [404, status(404, 'NotFound', 'the server could not find the requested resource')];
    const [, ns, resource, name, sub] = m as unknown as [string, string, string, string | undefined, string | undefined];
    const group = u.pathname.startsWith('/apis/apps/') ? 'apps' : u.pathname.startsWith('/apis/metrics') ? 'metrics' : 'core';

    for (const f of faults) {
      if (f.used >= (f.times ?? 1) || f.resource !== resource || (f.method && f.method !== method) || (f.sub ?? undefined) !== sub)
        continue;
      if (f.seen++ < (f.skip ?? 0)) continue;
      f.used++;
      if (f.status === 'hang') {
        hung.add(res);
        return [-1, undefined];
      }
      if (f.commit) await handleResource(req, u, method, ns, resource, group, name, sub);
      return [f.status, status(f.status, f.status >= 500 ? 'InternalError' : 'Failure', 'etcdserver: request timed out (injected)')];
    }
    return handleResource(req, u, method, ns, resource, group, name, sub);
  }

  async function handleResource(
    req: IncomingMessage,
    u: URL,
    method: string,
    ns: string,
    resource: string,
    group: string,
    name?: string,
    sub?: string,
  ): Promise<[number, unknown, string?]> {
    reconcile();
    if (group === 'metrics') {
      if (!api.metricsAvailable) return [404, status(404, 'NotFound', 'the server could not find the requested resource')];
      const pod = name ? api.pods.get(name) : undefined;
      if (resource !== 'pods' || !pod) return [404, status(404, 'NotFound', `pods.metrics.k8s.io "${name}" not found`)];
      const containers = [{ name: 'agent', usage: api.usage }];
      return [
        200,
        { kind: 'PodMetrics', apiVersion: 'metrics.k8s.io/v1beta1', metadata: { name, namespace: ns }, window: '15s', containers },
      ];
    }
    if (resource === 'pods' && group === 'core') {
      if (!name && method === 'GET') {
        const items = [...api.pods.values()]
          .filter((p) => p.metadata.namespace === ns && matches(p.metadata.labels, u.searchParams.get('labelSelector')))
          .map(podView);
        return [200, { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items }];
      }
      const pod = name ? api.pods.get(name) : undefined;
      if (!pod) return [404, status(404, 'NotFound', `pods "${name}" not found`)];
      if (sub === 'log' && method === 'GET') {
        if (Date.now() < pod.readyAt)
          return [400, status(400, 'BadRequest', `container "agent" in pod "${name}" is waiting to start: ContainerCreating`)];
        const tail = Number(u.searchParams.get('tailLines') ?? pod.log.length);
        const withTimes = u.searchParams.get('timestamps') === 'true';
        const lines = pod.log.slice(-tail).map((l) => (withTimes ? l : l.slice(l.indexOf(' ') + 1)));
        return [200, lines.map((l) => `${l}\n`).join(''), 'text/plain'];
      }
      return [405, status(405, 'MethodNotAllowed', 'not supported by this fake')];
    }
    if (!(resource in KINDS) || (resource === 'deployments') !== (group === 'apps'))
      return [404, status(404, 'NotFound', 'the server could not find the requested resource')];
    const r = resource as Resource;
    const store = api.store[r];
    const key = `${ns}/${name}`;
    const notFound = (): [number, unknown] => [404, status(404, 'NotFound', `${r} "${name}" not found`)];

    if (!name) {
      if (method === 'GET') {
        const items = [...store.values()].filter(
          (o) => o.metadata.namespace === ns && matches(o.metadata.labels, u.searchParams.get('labelSelector')),
        );
        return [200, { kind: `${KINDS[r].kind}List`, apiVersion: KINDS[r].apiVersion, metadata: { resourceVersion: String(rv) }, items }];
      }
      if (method !== 'POST') return [405, status(405, 'MethodNotAllowed', 'method not allowed')];
      const body = await readJson(req);
      const n = body?.metadata?.name as string | undefined;
      if (!body || body.kind !== KINDS[r].kind || !n || !DNS_1123.test(n))
        return [422, status(422, 'Invalid', `${KINDS[r].kind} is invalid`)];
      if (store.has(`${ns}/${n}`))
        return [409, { ...status(409, 'AlreadyExists', `${r} "${n}" already exists`), details: { name: n, kind: r } }];
      const obj = admit(r, ns, body);
      store.set(`${ns}/${n}`, obj);
      reconcile();
      return [201, obj];
    }
    const current = store.get(key);
    if (sub === 'scale') {
      if (r !== 'deployments' || !current) return notFound();
      if (method === 'PATCH' || method === 'PUT') {
        if (method === 'PATCH' && !/merge-patch|strategic-merge-patch/.test(req.headers['content-type'] ?? ''))
          return [415, status(415, 'UnsupportedMediaType', 'unsupported patch type')];
        const body = await readJson(req);
        if (typeof body?.spec?.replicas === 'number') {
          const next = admit(r, ns, { ...current, spec: { ...current.spec, replicas: body.spec.replicas } }, current);
          store.set(key, next);
          reconcile();
        }
      }
      const d = store.get(key)!;
      const scale = {
        kind: 'Scale',
        apiVersion: 'autoscaling/v1',
        metadata: { name, namespace: ns, resourceVersion: d.metadata.resourceVersion },
      };
      return [200, { ...scale, spec: { replicas: d.spec.replicas }, status: { replicas: d.status?.replicas ?? 0 } }];
    }
    if (method === 'GET') return current ? [200, current] : notFound();
    if (method === 'DELETE') {
      if (!current) return notFound();
      store.delete(key);
      if (r === 'deployments') for (const [podName, p] of api.pods) if (p.owner === key) api.pods.delete(podName);
      return [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: r } }];
    }
    if (!current) return notFound();
    const body = await readJson(req);
    if (!body) return [400, status(400, 'BadRequest', 'no body')];
    let next: Obj;
    if (method === 'PUT') {
      if (body.metadata?.resourceVersion !== current.metadata.resourceVersion)
        return [409, status(409, 'Conflict', `Operation cannot be fulfilled on ${r} "${name}": the object has been modified`)];
      if (r === 'services' && body.spec?.clusterIP !== undefined && body.spec.clusterIP !== current.spec.clusterIP)
        return [422, status(422, 'Invalid', 'spec.clusterIP: Invalid value: field is immutable')];
      next = admit(r, ns, body, current);
    } else if (method === 'PATCH') {
      if (!/merge-patch|strategic-merge-patch/.test(req.headers['content-type'] ?? ''))
        return [415, status(415, 'UnsupportedMediaType', 'unsupported patch type')];
      next = admit(r, ns, mergePatch(current, body) as Obj, current);
    } else return [405, status(405, 'MethodNotAllowed', 'method not allowed')];
    store.set(key, next);
    reconcile();
    return [200, store.get(key)];
  }

  const server = createServer((req, res) => {
    if (api.down) {
      req.socket.destroy();
      return;
    }
    const u = new URL(req.url ?? '/', api.origin);
    handle(req, res, u).then(
      ([code, body, type]) => {
        if (code === -1) return; // hung on purpose
        if (!u.pathname.startsWith('/svc/'))
          api.requests.push({ method: req.method ?? 'GET', path: u.pathname, contentType: req.headers['content-type'], status: code });
        send(res, code, body, type);
      },
      (err: Error) => send(res, 500, status(500, 'InternalError', err.message)),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  api.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.close = () =>
    new Promise<void>((r) => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      server.close(() => r());
    });
  return api;
}
