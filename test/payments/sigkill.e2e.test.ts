/**
 * 13.9 proof: the platform (a real `node src/main.ts` process) killed with SIGKILL in the middle
 * of a burst of session debits. After a restart every debit a client saw acknowledged (200 with a
 * Payment-Receipt) is in the journal, and every balance equals the sum of its journal rows.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { createLedgerService } from '../../src/domains/payments/ledger/ledger.service.ts';
import { openSessionTypes, type paymentDomain, sessionKeyHash } from '../../src/domains/payments/sessions/receipts.rules.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

const root = join(import.meta.dirname, '..', '..');
const dataDir = mkdtempSync(join(tmpdir(), 'platform-sigkill-'));
chmodSync(dataDir, 0o755);
const children: ChildProcess[] = [];
let database: TestDatabase;
let router: FakeOpenAi;
let port = 0;

beforeAll(async () => {
  database = await createTestDatabase();
  router = await startFakeOpenAi({ apiKey: 'router-key', quiet: true });
  router.delayMs = 5; // calls are in flight when the process dies
  port = await freePort();
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await router?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

function startPlatform() {
  const child = spawn(process.execPath, ['src/main.ts', 'web'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      WEB_PORT: String(port),
      INTERNAL_API_KEY: 'sigkill-test-key',
      // processes sharing DATABASE_URL need the keys from the environment (docs/configuration.md)
      WALLET_ENCRYPTION_KEY: '11'.repeat(32),
      SECRETS_ENCRYPTION_KEY: '22'.repeat(32),
      ROUTER_API_KEY: 'router-key',
      ROUTER_BASE_URL: router.url,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited };
}

async function waitUp(timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/health`);
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > until) throw new Error('platform did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('SIGKILL in the middle of a burst of debits', () => {
  it('after restart every acknowledged debit is in the journal and balances equal the journal', async () => {
    const first = startPlatform();
    await waitUp();
    const pk = generatePrivateKey();
    const account = privateKeyToAccount(pk);
    const ledger = createLedgerService({ db: database.db });
    await ledger.credit({ address: account.address, amountMicros: 5_000_000, eventId: 'evt_sigkill', source: 'test' });
    const deadline = Math.floor(Date.now() / 1000) + 600;
    const salt = `0x${randomBytes(32).toString('hex')}` as Hex;
    const sessionId = `ps_${randomBytes(32).toString('base64url')}`;
    const { domain } = (await (await fetch(`http://127.0.0.1:${port}/api/payments/receipt-signer`)).json()) as {
      domain: ReturnType<typeof paymentDomain>;
    };
    const signature = await account.signTypedData({
      domain,
      types: openSessionTypes,
      primaryType: 'OpenSession',
      message: {
        wallet: account.address,
        deposit: 3_000_000n,
        deadline: BigInt(deadline),
        salt,
        sessionKeyHash: sessionKeyHash(sessionId),
      },
    });
    const opened = await fetch(`http://127.0.0.1:${port}/api/wallet/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        address: account.address,
        deposit: '3.00',
        signature,
        deadline,
        salt,
        sessionKeyHash: sessionKeyHash(sessionId),
      }),
    });
    expect(opened.status).toBe(201);

    // a burst: 16 clients calling in a loop until the process dies; kill it after 40 acknowledgements
    const acknowledged: string[] = [];
    let killed = false;
    const client = async () => {
      while (!killed) {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/api/v1/gateway`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-payment-method': 'session',
              'x-session-id': sessionId,
              'x-wallet-address': account.address,
            },
            body: JSON.stringify({ plugin: 'generate-text', prompt: 'burst' }),
          });
          if (res.status === 200) {
            await res.arrayBuffer();
            acknowledged.push(res.headers.get('payment-receipt')!);
            if (acknowledged.length >= 40 && !killed) {
              killed = true;
              first.child.kill('SIGKILL');
            }
          } else await res.arrayBuffer();
        } catch {
          return; // connection refused or reset: the process is gone
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, client));
    await first.exited;
    expect(first.child.signalCode).toBe('SIGKILL');
    expect(acknowledged.length).toBeGreaterThanOrEqual(40);

    const second = startPlatform();
    await waitUp();
    const k = database.db.kysely;
    const rows = await sql<{ nonce: string }>`SELECT nonce FROM ledger_entries WHERE kind = 'session_debit'`.execute(k);
    const journal = new Set(rows.rows.map((r) => r.nonce));
    for (const receipt of acknowledged) expect(journal.has(receipt.split(':').pop()!)).toBe(true);
    expect(await ledger.audit()).toEqual([]);
    // the restarted platform reports what the journal says
    const view = (await (
      await fetch(`http://127.0.0.1:${port}/api/wallet/sessions`, { headers: { 'x-session-id': sessionId } })
    ).json()) as { remaining: string; debits: number };
    const sums = await sql<{ debited: string; refunded: string }>`
      SELECT coalesce(sum(-session_delta) FILTER (WHERE kind = 'session_debit'), 0)::text AS debited,
             coalesce(sum(session_delta + wallet_delta) FILTER (WHERE kind = 'session_refund'), 0)::text AS refunded
        FROM ledger_entries WHERE kind IN ('session_debit', 'session_refund')`.execute(k);
    const remaining = 3_000_000 - Number(sums.rows[0]!.debited) + Number(sums.rows[0]!.refunded);
    expect(Number(view.remaining) * 1_000_000).toBeCloseTo(remaining, 0);
    expect(view.debits).toBe(journal.size);
    expect(await ledger.balance(account.address)).toBe(2_000_000);
    second.child.kill('SIGTERM');
    await second.exited;
  }, 90_000);
});
