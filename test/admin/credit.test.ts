/**
 * Money without a card processor (docs/admin.md "Credits", docs/payments.md "Credits by an
 * admin"): POST /api/admin/users/:id/credit credits the user's session wallet through the ledger,
 * once per Idempotency-Key, with the note and the admin's id in the journal; `npm run admin --
 * credit` does the same from a shell. §4.4: GET /api/wallet's `balance` is that ledger balance.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR_ID } from '../../src/domains/admin/admin.repo.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const root = join(import.meta.dirname, '..', '..');
let t: TestPlatform;
let admin: Awaited<ReturnType<typeof signUp>>;

beforeAll(async () => {
  // no card processor: the self-hosted default this credit exists for
  t = await startTestPlatform({ STRIPE_SECRET_KEY: '', ADMIN_EMAILS: '', REGISTER_RATE_LIMIT: '1000' });
  admin = await signUp(t.web);
  await t.platform.services.admin.setAdminByEmail(admin.email, true);
});
afterAll(async () => {
  if (t) expect(await t.platform.services.ledger.audit()).toEqual([]);
  await t?.close();
});

const credit = (userId: string, body: unknown, opts: { cookie?: string; key?: string | null } = {}) =>
  t.web.inject({
    method: 'POST',
    url: `/api/admin/users/${userId}/credit`,
    headers: {
      ...(opts.cookie !== undefined ? { cookie: opts.cookie } : { cookie: admin.cookie }),
      ...(opts.key === null ? {} : { 'idempotency-key': opts.key ?? randomUUID() }),
    },
    payload: body as object,
  });
const wallet = async (cookie: string) => (await t.web.inject({ method: 'GET', url: '/api/wallet', headers: { cookie } })).json();
const adminCredits = async (userId: string) => {
  const r = await sql<{ n: number; total: string | null }>`
    SELECT count(*)::int AS n, sum(wallet_delta)::text AS total FROM ledger_entries e JOIN session_wallets w ON lower(w.address) = e.address
     WHERE w.user_id = ${userId} AND e.source = 'admin_credit'`.execute(t.database.db.kysely);
  return { n: r.rows[0]!.n, totalMicros: Number(r.rows[0]!.total ?? 0) };
};

describe('POST /api/admin/users/:id/credit', () => {
  it('401 signed out, 403 for a non-admin, 404 for an unknown user; nothing credited', async () => {
    const u = await signUp(t.web);
    expect((await credit(u.id, { amountUsd: 5 }, { cookie: '' })).statusCode).toBe(401);
    const self = await credit(u.id, { amountUsd: 5 }, { cookie: u.cookie });
    expect([self.statusCode, self.json().code]).toEqual([403, 'ADMIN_REQUIRED']);
    const unknown = await credit(randomUUID(), { amountUsd: 5 });
    expect([unknown.statusCode, unknown.json().error]).toEqual([404, 'User not found']);
    expect(await adminCredits(u.id)).toEqual({ n: 0, totalMicros: 0 });
    expect((await wallet(u.cookie)).hasWallet).toBe(false);
  });

  it('400 with a clear error for a bad amount, note, key or id', async () => {
    const u = await signUp(t.web);
    const amountRule = /^Invalid amountUsd: a number more than 0 and at most 10000, in whole cents$/;
    for (const amountUsd of [0, -1, 10_000.01, 10_001, 1.005, 0.001, '5', null, Number.NaN]) {
      const res = await credit(u.id, { amountUsd });
      expect(res.statusCode, `${amountUsd}`).toBe(400);
      expect(res.json().error, `${amountUsd}`).toMatch(amountRule);
    }
    expect((await credit(u.id, {})).json().error).toMatch(amountRule);
    const longNote = await credit(u.id, { amountUsd: 1, note: 'x'.repeat(501) });
    expect([longNote.statusCode, longNote.json().error]).toEqual([400, 'Invalid note: at most 500 characters']);
    expect((await credit(u.id, { amountUsd: 1, note: 5 })).json().error).toBe('Invalid note: a string');
    const noKey = await credit(u.id, { amountUsd: 1 }, { key: null });
    expect([noKey.statusCode, noKey.json().error]).toEqual([400, 'Idempotency-Key header required']);
    const badKey = await credit(u.id, { amountUsd: 1 }, { key: 'x'.repeat(201) });
    expect([badKey.statusCode, badKey.json().error]).toEqual([400, 'Idempotency-Key must be 1 to 200 visible ASCII characters']);
    expect((await credit('not-a-uuid', { amountUsd: 1 })).statusCode).toBe(400);
    expect(await adminCredits(u.id)).toEqual({ n: 0, totalMicros: 0 });
  });

  it('credits a user without a wallet (creating it), with the note and the admin in the journal; the limit is inclusive', async () => {
    const u = await signUp(t.web);
    expect(await wallet(u.cookie)).toMatchObject({ hasWallet: false, balance: '0' });
    const res = await credit(u.id, { amountUsd: 12.5, note: 'Welcome credit' });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json().credit;
    expect(body).toMatchObject({ userId: u.id, amountUsd: '12.50', note: 'Welcome credit', balanceAfter: '12.50' });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const w = await wallet(u.cookie);
    expect(w).toMatchObject({ hasWallet: true, balance: '12.50' });
    expect(body.address).toBe(w.address.toLowerCase());
    const row = await t.database.db.kysely
      .selectFrom('ledger_entries')
      .select(['kind', 'source', 'note', 'actor_user_id', 'wallet_delta'])
      .where('id', '=', body.entryId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({
      kind: 'credit',
      source: 'admin_credit',
      note: 'Welcome credit',
      actor_user_id: admin.id,
      wallet_delta: 12_500_000,
    });
    const max = await credit(u.id, { amountUsd: 10_000 });
    expect(max.statusCode).toBe(200);
    expect((await wallet(u.cookie)).balance).toBe('10012.50');
  });

  it('a repeat of one Idempotency-Key answers the same credit and credits nothing; another amount with it is 409', async () => {
    const u = await signUp(t.web);
    const key = randomUUID();
    const first = await credit(u.id, { amountUsd: 3, note: 'once' }, { key });
    const again = await credit(u.id, { amountUsd: 3, note: 'once' }, { key });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await wallet(u.cookie)).balance).toBe('3.00');
    const other = await credit(u.id, { amountUsd: 4, note: 'once' }, { key });
    expect([other.statusCode, other.json().code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);
    const otherUser = await signUp(t.web);
    expect((await credit(otherUser.id, { amountUsd: 3, note: 'once' }, { key })).statusCode).toBe(409);
    expect(await adminCredits(u.id)).toEqual({ n: 1, totalMicros: 3_000_000 });
    expect((await wallet(otherUser.cookie)).balance).toBe('0');
  });

  it('a note the journal cannot store as sent is 400 before anything is credited; the credited request answers 200, its repeat too', async () => {
    const u = await signUp(t.web);
    const key = 'surrogate-demo';
    const raw = (payload: string) =>
      t.web.inject({
        method: 'POST',
        url: `/api/admin/users/${u.id}/credit`,
        headers: { cookie: admin.cookie, 'idempotency-key': key, 'content-type': 'application/json' },
        payload,
      });
    // the JSON text as a client sends it: a lone high surrogate, a lone low one, a NUL
    for (const note of ['x\\ud800', '\\udc00y', 'a\\u0000b']) {
      for (let i = 0; i < 2; i++) {
        const res = await raw(`{"amountUsd":1,"note":"${note}"}`);
        expect([res.statusCode, res.json().error], note).toEqual([400, 'Invalid note: contains a NUL character or an unpaired surrogate']);
      }
    }
    expect(await adminCredits(u.id)).toEqual({ n: 0, totalMicros: 0 });
    expect((await wallet(u.cookie)).hasWallet).toBe(false);
    // the shell's path (scripts/admin.ts calls creditUser as the operator) refuses it the same way
    const operator = { id: OPERATOR_ID, isAdmin: true };
    await expect(
      t.platform.services.admin.creditUser(operator, u.id, { amountMicros: 1_000_000, note: 'x\ud800', requestId: 'shell-surrogate' }),
    ).rejects.toMatchObject({ status: 400, message: 'Invalid note: contains a NUL character or an unpaired surrogate' });
    expect(await adminCredits(u.id)).toEqual({ n: 0, totalMicros: 0 });

    // the refused requests did not use the key; a storable note credits once under it
    const first = await raw('{"amountUsd":1,"note":"caf\\u0065\\u0301"}');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await raw('{"amountUsd":1,"note":"caf\\u0065\\u0301"}');
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(again.json()).toEqual(first.json());
    // the same note in another Unicode normalisation form (NFC é) is the same credit
    const composed = await raw('{"amountUsd":1,"note":"caf\\u00e9"}');
    expect([composed.statusCode, composed.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(composed.json()).toEqual(first.json());
    expect(await adminCredits(u.id)).toEqual({ n: 1, totalMicros: 1_000_000 });
    expect((await wallet(u.cookie)).balance).toBe('1.00');
  });

  it('concurrent: N credits with distinct keys credit exactly N times into one new wallet; N repeats of one key credit once', async () => {
    const u = await signUp(t.web);
    const N = 12;
    const distinct = await Promise.all(Array.from({ length: N }, () => credit(u.id, { amountUsd: 0.25 })));
    expect(distinct.map((r) => r.statusCode)).toEqual(Array(N).fill(200));
    const wallets = await t.database.db.kysely.selectFrom('session_wallets').select('address').where('user_id', '=', u.id).execute();
    expect(wallets).toHaveLength(1);
    expect(await adminCredits(u.id)).toEqual({ n: N, totalMicros: N * 250_000 });
    const key = randomUUID();
    const same = await Promise.all(Array.from({ length: N }, () => credit(u.id, { amountUsd: 1 }, { key })));
    expect(same.map((r) => r.statusCode)).toEqual(Array(N).fill(200));
    expect(new Set(same.map((r) => r.body)).size).toBe(1);
    expect(same.filter((r) => r.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
    expect(await adminCredits(u.id)).toEqual({ n: N + 1, totalMicros: N * 250_000 + 1_000_000 });
    expect((await wallet(u.cookie)).balance).toBe('4.00');
  });
});

describe('npm run admin -- credit', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['scripts/admin.ts', ...args], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: t.database.url,
        LOG_LEVEL: 'silent',
        WALLET_ENCRYPTION_KEY: 'ab'.repeat(32),
        SECRETS_ENCRYPTION_KEY: 'cd'.repeat(32),
      },
    });

  it('credits by email with a note, once per --request-id; refuses a bad amount and an unknown email', async () => {
    const u = await signUp(t.web);
    const ok = run('credit', u.email.toUpperCase(), '7.25', 'from', 'the', 'shell', '--request-id', 'shell-1');
    expect(ok.stderr).toBe('');
    expect(ok.stdout).toMatch(/^Credited \$7\.25 to .* balance after: \$7\.25/);
    expect(ok.status).toBe(0);
    const again = run('credit', u.email, '7.25', 'from the shell', '--request-id', 'shell-1');
    expect(again.stdout).toMatch(/^Already credited \$7\.25/);
    expect((await wallet(u.cookie)).balance).toBe('7.25');
    const row = await sql<{ note: string; actor: string }>`
      SELECT note, actor_user_id::text AS actor FROM ledger_entries WHERE source = 'admin_credit' AND event_id LIKE '%:shell-1'`.execute(
      t.database.db.kysely,
    );
    expect(row.rows).toEqual([{ note: 'from the shell', actor: '00000000-0000-0000-0000-000000000001' }]);
    const tooMuch = run('credit', u.email, '10000.01');
    expect([tooMuch.status, tooMuch.stderr.trim()]).toEqual([
      1,
      'Invalid amountUsd: a number more than 0 and at most 10000, in whole cents',
    ]);
    expect(run('credit', u.email, 'five').status).toBe(2);
    const nobody = run('credit', 'nobody-here@example.com', '1');
    expect([nobody.status, nobody.stderr]).toEqual([1, 'No account with the email nobody-here@example.com\n']);
    expect(run('credit').stderr).toMatch(/npm run admin -- credit <email> <usd> \[note\]/);
    expect((await wallet(u.cookie)).balance).toBe('7.25');
  }, 90_000);
});
