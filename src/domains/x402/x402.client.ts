/**
 * The x402 gateway upstream (§4.11), behind an interface (docs/architecture.md rule 4). The HTTP
 * client is the real implementation; tests run it against a local fake (test/fakes/x402-gateway.ts).
 *
 * Upstream protocol (the specification does not show it; this is our contract, documented in the
 * OpenAPI description of /api/x402 and docs/payments.md "x402"), all JSON, under X402_GATEWAY_URL:
 * - `GET  /health`                      health fields (`status`, `service`, `agents`, `colonies`, …)
 * - `POST /colony/join`                 `{agentId, walletAddress}`
 * - `GET  /fitness/<agentId>`           `{score, tier, details}`
 * - `GET  /pricing/<agentId>`           `{agentId, tier, pricing, fitness}`
 * - `GET  /endpoints`                   `{endpoints:[{slug, description, price}]}`
 * - `POST /pay`                         `{agentId, amount, currency, recipient, endpoint?, method}`;
 *   may answer HTTP 402 with x402 payment requirements, which the payer (./x402.payer.ts) pays.
 */
import type { X402Payer } from './x402-payer.client.ts';

/** §4.11 GET /api/x402: a health probe is short; an upstream that does not answer in time is "unreachable". */
export const X402_HEALTH_TIMEOUT_MS = 5_000;
/** §8 "x402 colony join timeout: 10 seconds". */
export const X402_COLONY_JOIN_TIMEOUT_MS = 10_000;
/** fitness, pricing, endpoints and pay (pay includes signing an x402 payment and the retry). */
export const X402_CALL_TIMEOUT_MS = 15_000;
/** Upstream bodies larger than this are unreadable (a runaway upstream must not exhaust memory). */
const MAX_BODY_BYTES = 1024 * 1024;

/**
 * What one upstream call produced. Failures are values; the service maps them to the §4.11 errors.
 * `paid`: the platform's payer signed an x402 payment during the call (a signed authorization
 * may be settled whatever the gateway answers next) or the gateway confirmed one.
 */
export type X402Result =
  | { ok: true; status: number; body: unknown; paid: boolean }
  | { ok: false; reason: 'unreachable' | 'timeout'; paid?: boolean }
  | { ok: false; reason: 'bad_status'; status: number; text: string; paid: boolean }
  | { ok: false; reason: 'invalid_json'; status: number; paid?: boolean }
  /** the upstream asked for an x402 payment (HTTP 402) the platform could not or would not make */
  | { ok: false; reason: 'payment_failed'; message: string; paid?: boolean };

export type X402PayInput = {
  agentId: string;
  amount: number;
  currency: string;
  recipient: string;
  endpoint?: string | undefined;
  method: string;
};

export interface X402Gateway {
  /** the upstream URL, as GET /api/x402 reports it in `gateway` */
  readonly url: string;
  health(): Promise<X402Result>;
  joinColony(input: { agentId: string; walletAddress: string }): Promise<X402Result>;
  fitness(agentId: string): Promise<X402Result>;
  pricing(agentId: string): Promise<X402Result>;
  endpoints(): Promise<X402Result>;
  pay(input: X402PayInput): Promise<X402Result>;
}

export function createHttpX402Gateway(options: {
  baseUrl: string;
  payer?: X402Payer | undefined;
  fetch?: typeof fetch;
  timeouts?: { healthMs?: number; colonyJoinMs?: number; callMs?: number };
}): X402Gateway {
  const base = options.baseUrl.replace(/\/+$/, '');
  const plainFetch = options.fetch ?? fetch;
  const healthMs = options.timeouts?.healthMs ?? X402_HEALTH_TIMEOUT_MS;
  const colonyJoinMs = options.timeouts?.colonyJoinMs ?? X402_COLONY_JOIN_TIMEOUT_MS;
  const callMs = options.timeouts?.callMs ?? X402_CALL_TIMEOUT_MS;

  async function call(
    method: 'GET' | 'POST',
    path: string,
    timeoutMs: number,
    body?: unknown,
    doFetch: typeof fetch = plainFetch,
  ): Promise<X402Result> {
    // one deadline covers connect, headers, an x402 payment's retry and the whole body
    const signal = AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await doFetch(base + path, {
        method,
        headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal,
        redirect: 'error',
      });
    } catch (err) {
      if (signal.aborted) return { ok: false, reason: 'timeout' };
      // @x402/fetch throws these when it cannot read or pay the challenge (no option within the cap, bad header)
      const message = err instanceof Error ? err.message : String(err);
      if (/payment/i.test(message)) return { ok: false, reason: 'payment_failed', message };
      return { ok: false, reason: 'unreachable' };
    }
    const paid = res.headers.has('payment-response') || res.headers.has('x-payment-response');
    let text: string;
    try {
      text = await res.text();
    } catch {
      return { ok: false, reason: signal.aborted ? 'timeout' : 'unreachable' };
    }
    if (res.status < 200 || res.status > 299)
      return { ok: false, reason: 'bad_status', status: res.status, text: text.slice(0, 200), paid };
    if (Buffer.byteLength(text) > MAX_BODY_BYTES) return { ok: false, reason: 'invalid_json', status: res.status };
    try {
      return { ok: true, status: res.status, body: JSON.parse(text) as unknown, paid };
    } catch {
      return { ok: false, reason: 'invalid_json', status: res.status };
    }
  }

  const id = (agentId: string) => encodeURIComponent(agentId);
  return {
    url: options.baseUrl,
    health: () => call('GET', '/health', healthMs),
    joinColony: (input) => call('POST', '/colony/join', colonyJoinMs, input),
    fitness: (agentId) => call('GET', `/fitness/${id(agentId)}`, callMs),
    pricing: (agentId) => call('GET', `/pricing/${id(agentId)}`, callMs),
    endpoints: () => call('GET', '/endpoints', callMs),
    async pay(input) {
      const body = { ...input };
      if (!options.payer) {
        const res = await call('POST', '/pay', callMs, body);
        // without a payer, an x402 challenge is refused here rather than passed on as a 402 the user cannot pay
        if (!res.ok && res.reason === 'bad_status' && res.status === 402) {
          return { ok: false, reason: 'payment_failed', message: 'The x402 gateway asked for a payment and no payer is configured' };
        }
        return res;
      }
      // the paying fetch retries through this one with the signature in a header: seeing it is
      // knowing a payment was signed, whatever the gateway answers (or fails to) afterwards
      let signed = false;
      const observing: typeof fetch = (request, init) => {
        if (request instanceof Request && (request.headers.has('payment-signature') || request.headers.has('x-payment'))) signed = true;
        return plainFetch(request, init);
      };
      const res = await call('POST', '/pay', callMs, body, options.payer.payingFetch(input.amount, observing));
      // still 402 after paying: the gateway refused the signed payment
      if (!res.ok && res.reason === 'bad_status' && res.status === 402) {
        return { ok: false, reason: 'payment_failed', message: 'The x402 gateway refused the signed payment', paid: signed };
      }
      return signed ? { ...res, paid: true } : res;
    },
  };
}
