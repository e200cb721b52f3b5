/**
 * A local x402 gateway speaking the upstream contract of src/domains/x402/x402.client.ts:
 * GET /health, POST /colony/join, GET /fitness/:id, GET /pricing/:id, GET /endpoints, POST /pay.
 * Behaviours per route through `mode`: answer, hang (never answer), fail (500), 402, invalid JSON.
 * `payMode: 'x402'` makes POST /pay answer HTTP 402 with x402 v2 payment requirements (the
 * `PAYMENT-REQUIRED` header, base64 JSON) until a request carries a `PAYMENT-SIGNATURE` header,
 * which it decodes and keeps in `payments` for the test to check (it does not settle on a chain).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeX402Mode = 'ok' | 'hang' | 'fail' | 'payment-required' | 'invalid-json';
export type FakeX402Request = { method: string; path: string; body: unknown; paymentSignature: string | undefined };

/** Base mainnet USDC, as the x402 packages know it (EIP-3009 domain name `USD Coin`, version 2). */
export const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const FAKE_PAY_TO = '0x1111111111111111111111111111111111111111';

export type FakeX402Gateway = {
  url: string;
  requests: FakeX402Request[];
  /** per upstream path prefix (`health`, `colony`, `fitness`, `pricing`, `endpoints`, `pay`) */
  modes: Record<string, FakeX402Mode>;
  /** `plain`: /pay answers 200 at once; `x402`: it asks for an x402 payment of `priceAtomic` USDC units first */
  payMode: 'plain' | 'x402';
  priceAtomic: string;
  /** decoded PAYMENT-SIGNATURE headers the fake accepted */
  payments: unknown[];
  close(): Promise<void>;
};

export async function startFakeX402Gateway(): Promise<FakeX402Gateway> {
  const hanging = new Set<ServerResponse>();
  const fake = {
    requests: [] as FakeX402Request[],
    modes: {} as Record<string, FakeX402Mode>,
    payMode: 'plain' as 'plain' | 'x402',
    priceAtomic: '1500000',
    payments: [] as unknown[],
  };

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
    const paymentSignature = (req.headers['payment-signature'] as string | undefined) ?? undefined;
    fake.requests.push({ method: req.method ?? '', path: url.pathname, body, paymentSignature });
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(payload));
    };

    const [, area = '', id = ''] = url.pathname.split('/');
    const mode = fake.modes[area] ?? 'ok';
    if (mode === 'hang') {
      hanging.add(res);
      return;
    }
    if (mode === 'fail') return send(500, { error: 'gateway exploded' });
    if (mode === 'payment-required') return send(402, { error: 'stake required' });
    if (mode === 'invalid-json') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<html>oops</html>');
    }

    if (req.method === 'GET' && area === 'health') {
      return send(200, { status: 'healthy', service: 'fake-x402', agents: 3, colonies: 1, timestamp: '2026-01-01T00:00:00.000Z' });
    }
    if (req.method === 'POST' && area === 'colony' && id === 'join') {
      const b = body as { agentId?: string; walletAddress?: string };
      return send(200, { joined: true, agentId: b.agentId, walletAddress: b.walletAddress, colony: 'alpha' });
    }
    if (req.method === 'GET' && area === 'fitness') {
      return send(200, {
        score: 72,
        tier: 'silver',
        details: { prediction: 70, execution: 75, coordination: 71 },
        agent: decodeURIComponent(id),
      });
    }
    if (req.method === 'GET' && area === 'pricing') {
      return send(200, {
        agentId: decodeURIComponent(id),
        tier: 'silver',
        pricing: { rate: 0.01, discount: 0.1 },
        fitness: { score: 72, tier: 'silver' },
      });
    }
    if (req.method === 'GET' && area === 'endpoints') {
      return send(200, { endpoints: [{ slug: 'weather', description: 'Weather now', price: '0.01' }] });
    }
    if (req.method === 'POST' && area === 'pay') {
      if (fake.payMode === 'x402' && !paymentSignature) {
        const required = {
          x402Version: 2,
          error: 'Payment required',
          resource: { url: `${address()}/pay`, description: 'x402 payment', mimeType: 'application/json' },
          accepts: [
            {
              scheme: 'exact',
              network: 'eip155:8453',
              asset: BASE_USDC,
              amount: fake.priceAtomic,
              payTo: FAKE_PAY_TO,
              maxTimeoutSeconds: 60,
              extra: { name: 'USD Coin', version: '2' },
            },
          ],
        };
        return send(402, {}, { 'payment-required': Buffer.from(JSON.stringify(required)).toString('base64') });
      }
      if (paymentSignature) fake.payments.push(JSON.parse(Buffer.from(paymentSignature, 'base64').toString('utf8')));
      const b = body as Record<string, unknown>;
      const settled = { success: true, transaction: `0x${'ab'.repeat(32)}`, network: 'eip155:8453', payer: 'fake' };
      return send(
        200,
        { success: true, txId: 'tx_fake_1', received: b },
        paymentSignature ? { 'payment-response': Buffer.from(JSON.stringify(settled)).toString('base64') } : {},
      );
    }
    send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return Object.assign(fake, {
    url: address(),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
