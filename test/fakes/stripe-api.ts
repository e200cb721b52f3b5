/**
 * A local card processor speaking Stripe's REST shapes, enough for the `stripe` SDK the platform
 * uses (src/domains/payments/card/stripe-processor.client.ts): form-encoded `POST /v1/checkout/sessions`
 * (bracketed keys such as `metadata[type]`, `line_items[0][price_data][unit_amount]`), bearer
 * secret key auth, Stripe's error body. `signedEvent` builds a webhook delivery signed the way
 * Stripe signs them (the SDK's own test header helper).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

export type FakeCheckoutSession = {
  id: string;
  object: 'checkout.session';
  url: string;
  mode: string;
  amount_total: number;
  currency: string;
  metadata: Record<string, string>;
  success_url: string;
  cancel_url: string;
  payment_status: 'unpaid' | 'paid';
  status: 'open' | 'complete';
};

export type FakeStripe = {
  url: string;
  secretKey: string;
  webhookSecret: string;
  sessions: FakeCheckoutSession[];
  /** answer every API call with 500 */
  failing: boolean;
  /** a completed-checkout (or other) event for a session, as the raw body and `payment-signature` header Stripe would send */
  signedEvent(
    type: string,
    object: Record<string, unknown>,
    opts?: { id?: string; secret?: string; created?: number },
  ): { body: string; signature: string; id: string };
  close(): Promise<void>;
};

/** `a[b][0][c]=v` pairs → nested objects/arrays (what Stripe's form encoding means). */
function parseForm(body: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const path = key.replace(/\]/g, '').split('[');
    let node = out as Record<string, unknown>;
    path.forEach((part, i) => {
      if (i === path.length - 1) node[part] = value;
      else node = (node[part] ??= {}) as Record<string, unknown>;
    });
  }
  return out;
}

export async function startFakeStripe(): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(8).toString('hex')}`;
  const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
  const sessions: FakeCheckoutSession[] = [];
  const state = { failing: false };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${randomBytes(6).toString('hex')}` });
      res.end(JSON.stringify(payload));
    };
    if (req.headers.authorization !== `Bearer ${secretKey}`) {
      return send(401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
    }
    if (state.failing) return send(500, { error: { type: 'api_error', message: 'Something went wrong' } });
    if (req.method === 'POST' && req.url === '/v1/checkout/sessions') {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as {
        mode?: string;
        success_url?: string;
        cancel_url?: string;
        metadata?: Record<string, string>;
        line_items?: Record<string, { quantity?: string; price_data?: { currency?: string; unit_amount?: string } }>;
      };
      const items = Object.values(form.line_items ?? {});
      const amount = items.reduce((sum, li) => sum + Number(li.price_data?.unit_amount ?? 0) * Number(li.quantity ?? 1), 0);
      if (!form.mode || !form.success_url || items.length === 0 || !(amount > 0)) {
        return send(400, { error: { type: 'invalid_request_error', message: 'Missing required param' } });
      }
      const id = `cs_test_${randomBytes(12).toString('hex')}`;
      const session: FakeCheckoutSession = {
        id,
        object: 'checkout.session',
        url: `https://checkout.stripe.test/c/pay/${id}`,
        mode: form.mode,
        amount_total: amount,
        currency: items[0]?.price_data?.currency ?? 'usd',
        metadata: form.metadata ?? {},
        success_url: form.success_url,
        cancel_url: form.cancel_url ?? '',
        payment_status: 'unpaid',
        status: 'open',
      };
      sessions.push(session);
      return send(200, session);
    }
    return send(404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${req.url})` } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const sdk = new Stripe(secretKey);
  return {
    url: `http://127.0.0.1:${port}`,
    secretKey,
    webhookSecret,
    sessions,
    get failing() {
      return state.failing;
    },
    set failing(v: boolean) {
      state.failing = v;
    },
    signedEvent(type, object, opts = {}) {
      const id = opts.id ?? `evt_${randomBytes(12).toString('hex')}`;
      const body = JSON.stringify({
        id,
        object: 'event',
        type,
        api_version: '2025-01-01',
        created: opts.created ?? Math.floor(Date.now() / 1000),
        data: { object },
      });
      const signature = sdk.webhooks.generateTestHeaderString({ payload: body, secret: opts.secret ?? webhookSecret });
      return { body, signature, id };
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
}
