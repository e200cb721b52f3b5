/**
 * A refusal is never a 500 (docs/payments.md "When a paid call is refused"): a paid call
 * (`POST /api/v1/gateway`, plugin `agent`) answered by the caller's own agent whose model call hit
 * the agent's monthly budget answers 429 with the budget's sentence — not 500 "The plugin failed"
 * — and the charge is given back. A real failure of the agent stays §4.8's 500 `internal`, and the
 * platform's log gets one line saying why (before, nothing was logged at all).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

const BUDGET = "This agent's monthly budget of $0.0005 is used up ($0.00054 spent since 2026-11-01). Raise it on the agent's Usage tab.";

/** what the agent's gateway answers next: its model call refused by the budget, or a failure of its own */
let answer: 'budget' | 'broken' = 'budget';
const agentGateway: Server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (answer === 'budget') {
      // the runtime passes the platform AI gateway's refusal on with its status and OpenAI body
      res.writeHead(429, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: BUDGET, type: 'insufficient_quota', code: 'budget_exceeded' } }));
    } else {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'runtime crashed', type: 'server_error' } }));
    }
  });
});

let lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
    done();
  },
});

let t: TestPlatform;
let user: { id: string; cookie: string };
let address: string;

beforeAll(async () => {
  await new Promise<void>((r) => agentGateway.listen(0, '127.0.0.1', r));
  t = await startTestPlatform({}, { logger: pino({ level: 'info' }, sink) });
  user = await signUp(t.web);
  const url = `http://127.0.0.1:${(agentGateway.address() as AddressInfo).port}`;
  const k = t.database.db.kysely;
  await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url) VALUES ('agent-refusal-1', ${user.id}, 'Ada', 'running', 'agent-refusal-1', ${url}, ${url})`.execute(
    k,
  );
  await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc) VALUES ('agent-refusal-1', ${user.id}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, 'gw-token-refusal')})`.execute(
    k,
  );
  address = (await t.platform.services.sessionWallet.ensureAddress(user.id)).toLowerCase();
  await t.platform.services.ledger.credit({ address, amountMicros: 1_000_000, eventId: 'evt_refusal_credit', source: 'test' });
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
  agentGateway.closeAllConnections();
  await new Promise((r) => agentGateway.close(r));
});
beforeEach(() => {
  lines = [];
});

const paidCall = () =>
  t.web.inject({
    method: 'POST',
    url: '/api/v1/gateway',
    headers: { cookie: user.cookie, 'content-type': 'application/json' },
    payload: { plugin: 'agent', messages: [{ role: 'user', content: 'paid hello' }] },
  });

describe('POST /api/v1/gateway when the agent refuses', () => {
  it("the agent's budget: 429 with the budget's sentence, the charge given back, no failure logged", async () => {
    answer = 'budget';
    const res = await paidCall();
    expect(res.statusCode, res.body).toBe(429);
    expect(res.json()).toEqual({ error: BUDGET, code: 'AGENT_BUDGET_EXCEEDED' });
    expect(await t.platform.services.ledger.balance(address)).toBe(1_000_000);
    expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it('a failure of the agent: 500 internal, nothing charged, and one error line in the log saying why', async () => {
    answer = 'broken';
    const res = await paidCall();
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'internal', message: 'The plugin failed; nothing was charged' });
    expect(await t.platform.services.ledger.balance(address)).toBe(1_000_000);
    const errors = lines.filter((l) => (l.level as number) >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ plugin: 'agent', reason: 'agent gateway answered 500' });
    expect(String(errors[0]!.msg)).toMatch(/^gateway plugin agent failed .*: agent gateway answered 500$/);
  });
});
