/**
 * "Not configured" is a calm, documented answer (§7; docs/dashboard.md "What the server offers"):
 * GET /api/features tells a client which integrations are set up, and a route of one that is not
 * answers its documented error while the log gets one warning line naming it, without a stack
 * trace (the newcomer audit of 2026-11-25 saw ERROR with a 20-line stack per click).
 */
import { Writable } from 'node:stream';
import { type LoggerOptions, pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggerOptions } from '../../src/http/shared/logging.ts';
import { signUp, startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

type Line = { level: number; msg: string; code?: string; err?: unknown; reqId?: string };
const lines: Line[] = [];
const stream = new Writable({
  write(chunk, _enc, cb) {
    for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
    cb();
  },
});

let t: TestPlatform;
beforeAll(async () => {
  const logger = pino({ ...(loggerOptions('info', 'json') as LoggerOptions), level: 'info' }, stream);
  t = await startTestPlatform({ LOG_LEVEL: 'info' }, { logger });
});
afterAll(() => t?.close());

const ADDRESS = '0x00000000000000000000000000000000000000aa';

describe('an integration that is not configured', () => {
  it.each([
    ['card top-up', 'GET', `/api/wallet/top-up?amount=1000&address=${ADDRESS}`, undefined, 'PROCESSOR_NOT_CONFIGURED'],
    ['plan checkout', 'POST', '/api/billing/checkout', { plan: 'collective' }, 'PROCESSOR_NOT_CONFIGURED'],
    ['stablecoin balances', 'GET', `/api/wallet?address=${ADDRESS}`, undefined, 'RPC_NOT_CONFIGURED'],
    ['custodial wallet', 'POST', '/api/wallet/create', { email: 'a@example.com' }, 'CDP_NOT_CONFIGURED'],
  ] as const)('%s: its documented error, and one warning line without a stack trace', async (_name, method, url, payload, code) => {
    const u = await signUp(t.web);
    const res = await t.web.inject({ method, url, headers: { cookie: u.cookie }, ...(payload ? { payload } : {}) });
    expect(res.statusCode).toBe(500);
    expect(res.json().code).toBe(code);
    const reqId = res.headers['x-request-id'];
    const mine = lines.filter((l) => l.reqId === reqId && l.level >= 40);
    expect(mine).toEqual([expect.objectContaining({ level: 40, code, msg: res.json().error })]);
    expect(mine[0]!.err).toBeUndefined();
    expect(JSON.stringify(mine[0])).not.toContain('    at ');
  });
});

describe('GET /api/features', () => {
  it('without integration settings: nothing to offer, no session needed', async () => {
    const res = await t.web.inject({ method: 'GET', url: '/api/features' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      cardPayments: false,
      chainBalances: false,
      custodialWallets: false,
      idp: false,
      codehost: false,
      calendar: false,
      passwordReset: false,
      x402: false,
      modelBilling: false,
    });
  });

  it('says what is configured', async () => {
    await withTestPlatform(
      {
        STRIPE_SECRET_KEY: 'sk_test_features',
        TEMPO_RPC_URL: 'http://127.0.0.1:9/rpc',
        CDP_API_KEY_ID: 'id',
        CDP_API_KEY_SECRET: 'secret',
        CALENDAR_CLIENT_ID: 'calendar-client',
        CALENDAR_CLIENT_SECRET: 'calendar-secret',
        X402_GATEWAY_URL: 'http://127.0.0.1:9/x402',
        AI_BILLING: 'balance',
      },
      async (p) => {
        const res = await p.web.inject({ method: 'GET', url: '/api/features' });
        // CALENDAR_CLIENT_ID and CALENDAR_CLIENT_SECRET turn calendar connections on (§4.6)
        expect(res.json()).toEqual({
          cardPayments: true,
          chainBalances: true,
          custodialWallets: true,
          idp: false,
          codehost: false,
          calendar: true,
          passwordReset: false,
          x402: true,
          modelBilling: true,
        });
      },
    );
  });
});
