/**
 * Gateway billing overhead (docs/payments.md): the same `generate-text` call on
 * POST /api/v1/gateway, against the same local upstream in the same run, paid two ways:
 *   key     — `Authorization: Bearer sk_…` (a user API key; the card method debits the user's
 *             wallet balance in the ledger);
 *   session — `X-Payment-Method: session` (bearer session id; the EIP-712 receipt is signed and
 *             the debit is one conditional INSERT … SELECT … FOR UPDATE).
 * Goal: session p50 at most 1.1x key p50. Beside them the floor (bench/lib/proxy-processes.ts: a
 * bare Node proxy in its own process, Fastify + undici forwarding the chat call to the same
 * upstream): each case's throughput over the floor's and its mean latency over the floor's, per
 * round. Settings as the AI proxy bench (BENCH_DURATION,
 * BENCH_WARMUP, BENCH_ROUNDS, BENCH_AI_DELAY_MS).
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadConfig } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import { openSessionTypes, type paymentDomain, sessionKeyHash } from '../src/domains/payments/sessions/receipts.rules.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type ClientResult, load, median, startUpstream, type Target } from './ai-proxy.bench.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { loadSettings } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { startFloorProcess } from './lib/proxy-processes.ts';
import { type BenchOutput, round } from './lib/report.ts';

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 16, rounds: 3 });
  const delayMs = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
  const levels = [1, 16];
  const upstream = await startUpstream(delayMs);
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  let platform: Platform | undefined;
  let web: App | undefined;
  let floor: Awaited<ReturnType<typeof startFloorProcess>> | undefined;
  try {
    database = await startBenchDatabase('gateway-bench');
    const dir = database.dir;
    const config = loadConfig(
      {
        DATA_DIR: dir,
        LOG_LEVEL: 'silent',
        INTERNAL_API_KEY: 'bench-internal-key',
        ROUTER_API_KEY: 'bench-router-key',
        ROUTER_BASE_URL: upstream.base,
      },
      { cwd: dir, readDotEnv: false },
    );
    db = createDb(database.url, { poolSize: config.DATABASE_POOL_SIZE });
    platform = createPlatform({ config, db, secrets: resolveSecrets(config) });
    web = await platform.buildWebApp();
    await web.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(web.server.address() as AddressInfo).port}`;
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

    // a user with a session wallet and an API key; the wallet funded in the ledger
    const email = `bench${Date.now()}@example.com`;
    await post('/api/register', { email, password: 'bench-password-long', name: 'Bench' });
    const login = await post('/api/auth/login', { email, password: 'bench-password-long' });
    const cookie = /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    const wallet = (await (await post('/api/wallet', { action: 'create' }, { cookie })).json()) as { address: string };
    const key = (await (await post('/api/keys', { name: 'bench' }, { cookie })).json()) as { key: string };
    await platform.services.ledger.credit({
      address: wallet.address,
      amountMicros: 900_000_000_000,
      eventId: 'bench-key',
      source: 'bench',
    });
    // a second wallet opens a session with an EIP-712 authorisation
    const account = privateKeyToAccount(generatePrivateKey());
    await platform.services.ledger.credit({
      address: account.address,
      amountMicros: 900_000_000_000,
      eventId: 'bench-session',
      source: 'bench',
    });
    const deadline = Math.floor(Date.now() / 1000) + 600;
    const salt = `0x${randomBytes(32).toString('hex')}` as Hex;
    // the wallet chooses the session id and signs its hash (docs/payments.md "Payment sessions")
    const opened = { sessionId: `ps_${randomBytes(32).toString('base64url')}` };
    const { domain } = (await (await fetch(`${base}/api/payments/receipt-signer`)).json()) as { domain: ReturnType<typeof paymentDomain> };
    const signature = await account.signTypedData({
      domain,
      types: openSessionTypes,
      primaryType: 'OpenSession',
      message: {
        wallet: account.address,
        deposit: 800_000_000_000n,
        deadline: BigInt(deadline),
        salt,
        sessionKeyHash: sessionKeyHash(opened.sessionId),
      },
    });
    const res = await post('/api/wallet/sessions', {
      address: account.address,
      deposit: '800000',
      signature,
      deadline,
      salt,
      sessionKeyHash: sessionKeyHash(opened.sessionId),
    });
    if (res.status !== 201) throw new Error(`opening the session answered ${res.status}: ${await res.text()}`);

    const body = JSON.stringify({ plugin: 'generate-text', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] });
    const url = `${base}/api/v1/gateway`;
    floor = await startFloorProcess(new URL(upstream.base).origin);
    const targets: Target[] = [
      {
        key: 'floor',
        url: floor.url,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }] }),
      },
      { key: 'key', url, headers: { 'content-type': 'application/json', authorization: `Bearer ${key.key}` }, body },
      {
        key: 'session',
        url,
        headers: {
          'content-type': 'application/json',
          'x-payment-method': 'session',
          'x-session-id': opened.sessionId,
          'x-wallet-address': account.address,
        },
        body,
      },
    ];
    for (const t of targets) {
      const res = await fetch(t.url, { method: 'POST', headers: t.headers, body: t.body });
      if (res.status !== 200) throw new Error(`${t.key} case answered ${res.status}: ${await res.text()}`);
      await res.text();
    }

    const results: Record<string, unknown> = {};
    const rows: string[] = [];
    const lines: string[] = [];
    for (const c of levels) {
      const perRound: Record<string, ClientResult[]> = {};
      for (let r = 0; r < settings.rounds; r++) {
        for (const target of targets)
          (perRound[target.key] ??= []).push(await load(target, c, settings.durationS, r === 0 ? settings.warmupS : 0.5));
      }
      const k = perRound.key!;
      const s = perRound.session!;
      const f = perRound.floor!;
      const overFloor = (runs: ClientResult[]) => ({
        throughput: round(median(runs.map((x, i) => x.rps / f[i]!.rps)), 3),
        meanMs: round(median(runs.map((x, i) => x.meanMs - f[i]!.meanMs)), 3),
      });
      const kf = overFloor(k);
      const sf = overFloor(s);
      const ratio50 = median(s.map((x, i) => x.p50Ms / k[i]!.p50Ms));
      const ratio99 = median(s.map((x, i) => x.p99Ms / k[i]!.p99Ms));
      results[`concurrency${c}`] = {
        floor: f,
        key: k,
        session: s,
        sessionToKeyP50: round(ratio50, 3),
        sessionToKeyP99: round(ratio99, 3),
        keyOverFloor: kf,
        sessionOverFloor: sf,
      };
      for (const [name, runs] of [
        ['floor', f],
        ['key', k],
        ['session', s],
      ] as const) {
        rows.push(
          `| ${c} | ${name} | ${round(median(runs.map((x) => x.rps)), 0)} | ${round(median(runs.map((x) => x.p50Ms)), 2)} | ${round(median(runs.map((x) => x.p99Ms)), 2)} | ${runs.reduce((a, x) => a + x.failures, 0)} |`,
        );
      }
      lines.push(
        `- concurrency ${c}: session / key latency p50 ${round(ratio50, 3)}x, p99 ${round(ratio99, 3)}x (goal ≤ 1.1x); ` +
          `over the floor: key ${kf.throughput}x its req/s and +${kf.meanMs} ms mean, session ${sf.throughput}x and +${sf.meanMs} ms`,
      );
    }
    results.machine = machine;
    results.settings = { ...settings, delayMs, levels };
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      `Upstream: local OpenAI-compatible server answering after a fixed ${delayMs} ms (its own process). Both cases call ` +
        '`POST /api/v1/gateway` with plugin `generate-text` on a real listening web app with the embedded PostgreSQL: **key** ' +
        "(`Authorization: Bearer sk_…`; the card method debits the caller's wallet balance in the ledger) and **session** " +
        '(`X-Payment-Method: session`; EIP-712 receipt signed, one-statement conditional debit); **floor**: a bare Node proxy ' +
        '(Fastify + undici, its own process) forwarding the same chat call to the same upstream, what any Node proxy pays here. ' +
        `${settings.rounds} alternating rounds of ${settings.durationS} s per case and level; medians over rounds; the ratio is per round, then the median.`,
      '',
      '| concurrency | case | req/s | p50 ms | p99 ms | failures |',
      '|---:|---|---:|---:|---:|---:|',
      ...rows,
      '',
      ...lines,
    ].join('\n');
    return { name: 'gateway', results, markdown };
  } finally {
    await web?.close().catch(() => {});
    await platform?.close().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
    if (floor) await stopProcess(floor.proc);
    await stopProcess(upstream.proc);
  }
}
