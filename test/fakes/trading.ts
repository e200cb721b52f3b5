/**
 * A local trading service speaking the upstream protocol our client uses (see
 * src/domains/trading/trading.client.ts): GET /balances?chains=, POST /prompt, GET /prompt/:jobId,
 * `Authorization: Bearer <key>`. `mode` switches to the failure behaviours the tests need.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeTradingRequest = { method: string; path: string; query: URLSearchParams; authorization: string | undefined; body: unknown };
export type FakeTradingMode = 'ok' | 'error' | 'unauthorized' | 'invalid-json' | 'hang';

export type FakeTrading = {
  url: string;
  requests: FakeTradingRequest[];
  mode: FakeTradingMode;
  close(): Promise<void>;
};

export async function startFakeTrading(): Promise<FakeTrading> {
  const requests: FakeTradingRequest[] = [];
  const hanging = new Set<ServerResponse>();
  const state: { mode: FakeTradingMode } = { mode: 'ok' };

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://localhost');
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      authorization: req.headers.authorization,
      body,
    });

    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    if (state.mode === 'hang') {
      hanging.add(res); // never answers
      return;
    }
    if (state.mode === 'error') return send(502, { error: 'exchange down' });
    if (state.mode === 'unauthorized') return send(401, { error: 'invalid api key' });
    if (state.mode === 'invalid-json') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<html>gateway error</html>');
    }
    const key = req.headers.authorization?.replace(/^Bearer /, '') ?? '';
    if (req.method === 'GET' && url.pathname === '/balances') {
      const chains = (url.searchParams.get('chains') ?? '').split(',');
      return send(200, { key, balances: chains.map((chain) => ({ chain, usd: '1.00' })) });
    }
    if (req.method === 'POST' && url.pathname === '/prompt') {
      return send(202, { jobId: 'job-1', status: 'queued', echo: body });
    }
    const job = /^\/prompt\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && job) {
      return send(200, { jobId: decodeURIComponent(job[1]!), status: 'completed', result: 'bought 1 ETH' });
    }
    return send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get mode() {
      return state.mode;
    },
    set mode(m: FakeTradingMode) {
      state.mode = m;
    },
    async close() {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
