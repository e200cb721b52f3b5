/**
 * A billed model call against an unbilled one (docs/payments.md "Model calls from the balance";
 * goal ≤ 1.1x): the same agent's model call through the agents' AI gateway
 * (`POST /api/agent-gateway/v1/chat/completions` with its `apk_` key, `max_tokens` 64), against the
 * same local upstream in the same run, on two backends over the same embedded PostgreSQL:
 *   off     — AI_BILLING=off (the default): the call is metered, not paid;
 *   balance — AI_BILLING=balance: before the call its most possible cost is held against the
 *             owner's balance (`hold_spend`, one statement), after it the usage write pays it
 *             through the ledger and gives the hold back (batched, off the answer's path).
 * Alternating rounds; per round the ratio of balance's latency to off's (p50 and mean), then the
 * median. Settings as the AI proxy bench (BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS,
 * BENCH_AI_DELAY_MS).
 */
import type { AddressInfo } from 'node:net';
import { loadConfig, MODEL_GATEWAY_PATH } from '../src/config/env.ts';
import { resolveSecrets } from '../src/config/secrets.ts';
import { createDb, type Db } from '../src/db/client.ts';
import type { App } from '../src/http/shared/base-app.ts';
import { sha256 } from '../src/lib/crypto.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { type ClientResult, load, median, startUpstream, type Target } from './ai-proxy.bench.ts';
import { type BenchDatabase, startBenchDatabase, stopProcess } from './lib/bench-db.ts';
import { loadSettings } from './lib/load.ts';
import { describeMachine, machineLine } from './lib/machine.ts';
import { type BenchOutput, round } from './lib/report.ts';

const AGENT_KEY = 'apk_billing_bench_agent_key';
const CASES = ['off', 'balance'] as const;

export async function run(): Promise<BenchOutput> {
  const machine = describeMachine();
  const settings = loadSettings({ durationS: 5, warmupS: 1, connections: 16, rounds: 5 });
  const delayMs = Number(process.env.BENCH_AI_DELAY_MS ?? 10);
  const levels = [1, 16];
  const upstream = await startUpstream(delayMs);
  let database: BenchDatabase | undefined;
  let db: Db | undefined;
  const platforms: Platform[] = [];
  const apps: App[] = [];
  try {
    database = await startBenchDatabase('billing-bench');
    const dir = database.dir;
    db = createDb(database.url, { poolSize: 20 });
    const start = async (billing: (typeof CASES)[number]) => {
      const config = loadConfig(
        {
          DATA_DIR: dir,
          LOG_LEVEL: 'silent',
          INTERNAL_API_KEY: 'bench-internal-key',
          ROUTER_API_KEY: 'bench-router-key',
          ROUTER_BASE_URL: upstream.base,
          AGENT_GATEWAY_RATE_LIMIT: '1000000000',
          AI_BILLING: billing,
        },
        { cwd: dir, readDotEnv: false },
      );
      const platform = createPlatform({ config, db: db!, secrets: resolveSecrets(config) });
      const backend = await platform.buildBackendApp();
      await backend.listen({ host: '127.0.0.1', port: 0 });
      platforms.push(platform);
      apps.push(backend);
      return { platform, url: `http://127.0.0.1:${(backend.server.address() as AddressInfo).port}${MODEL_GATEWAY_PATH}/chat/completions` };
    };
    const off = await start('off');
    const billed = await start('balance');

    // an owner on the network plan with one running agent whose platform key is AGENT_KEY (as a deploy leaves it),
    // and a balance that never runs out during the run
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO users (email, name, referral_code, plan, subscription_status)
       VALUES ('billing-bench@example.com', 'Billing bench', 'BILLINGBENCH', 'network', 'active') RETURNING id`,
    );
    const userId = rows[0]!.id;
    await db.pool.query(
      `INSERT INTO agents (id, user_id, name, subdomain, url, status) VALUES ('billing-bench', $1, 'Billing bench', 'billing-bench', 'http://127.0.0.1:9', 'running')`,
      [userId],
    );
    await db.pool.query(
      `INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc, platform_key_hash, platform_key_prefix)
       VALUES ('billing-bench', $1, 'unused', $2, $3)`,
      [userId, sha256(AGENT_KEY), AGENT_KEY.slice(0, 12)],
    );
    const address = await billed.platform.services.sessionWallet.ensureAddress(userId);
    await billed.platform.services.ledger.credit({
      address,
      amountMicros: 900_000_000_000,
      eventId: 'billing-bench',
      source: 'bench',
    });

    const body = JSON.stringify({
      model: 'openai/gpt-4o-mini',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'Say hello in one short sentence.' }],
    });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${AGENT_KEY}` };
    const targets: Target[] = [
      { key: 'off', url: off.url, headers, body },
      { key: 'balance', url: billed.url, headers, body },
    ];
    for (const t of targets) {
      const res = await fetch(t.url, { method: 'POST', headers: t.headers, body: t.body });
      if (res.status !== 200) throw new Error(`${t.key} case answered ${res.status}: ${await res.text()}`);
      await res.text();
    }
    const balanceBefore = await billed.platform.services.ledger.balance(address);

    const results: Record<string, unknown> = {};
    const rowsMd: string[] = [];
    const lines: string[] = [];
    for (const c of levels) {
      const perRound: Record<string, ClientResult[]> = {};
      for (let r = 0; r < settings.rounds; r++) {
        // alternate which case goes first, so neither always follows the other
        const order = r % 2 === 0 ? targets : [...targets].reverse();
        for (const target of order)
          (perRound[target.key] ??= []).push(await load(target, c, settings.durationS, r === 0 ? settings.warmupS : 0.5));
      }
      const o = perRound.off!;
      const b = perRound.balance!;
      const ratio = (pick: (x: ClientResult) => number) => round(median(b.map((x, i) => pick(x) / pick(o[i]!))), 3);
      const p50 = ratio((x) => x.p50Ms);
      const mean = ratio((x) => x.meanMs);
      const p99 = ratio((x) => x.p99Ms);
      const addedMs = round(median(b.map((x, i) => x.meanMs - o[i]!.meanMs)), 3);
      results[`concurrency${c}`] = {
        off: o,
        balance: b,
        billedToUnbilledP50: p50,
        billedToUnbilledMean: mean,
        billedToUnbilledP99: p99,
        addedMeanMs: addedMs,
      };
      for (const [name, runs] of [
        ['off', o],
        ['balance', b],
      ] as const) {
        rowsMd.push(
          `| ${c} | ${name} | ${round(median(runs.map((x) => x.rps)), 0)} | ${round(median(runs.map((x) => x.p50Ms)), 2)} | ${round(median(runs.map((x) => x.meanMs)), 2)} | ${round(median(runs.map((x) => x.p99Ms)), 2)} | ${runs.reduce((a, x) => a + x.failures, 0)} |`,
        );
      }
      lines.push(
        `- concurrency ${c}: billed / unbilled latency p50 **${p50}x**, mean ${mean}x, p99 ${p99}x (goal ≤ 1.1x); a billed call adds ${addedMs} ms mean`,
      );
    }
    // the billed calls were paid: the balance went down (the usage store writes in batches)
    await billed.platform.services.ai.usage.flush();
    const spentMicros = balanceBefore - (await billed.platform.services.ledger.balance(address));
    if (!(spentMicros > 0)) throw new Error('the billed case paid nothing: AI_BILLING=balance did not bill');
    results.machine = machine;
    results.settings = { ...settings, delayMs, levels };
    results.billedSpentMicros = spentMicros;
    const markdown = [
      `Machine: ${machineLine(machine)}`,
      '',
      `Upstream: local OpenAI-compatible server answering after a fixed ${delayMs} ms (its own process). Both cases send the same ` +
        "agent's model call (`POST /api/agent-gateway/v1/chat/completions`, its `apk_` key, `openai/gpt-4o-mini`, `max_tokens` 64) " +
        'to a real listening backend over the same embedded PostgreSQL: **off** (`AI_BILLING=off`: metered, not paid) and ' +
        "**balance** (`AI_BILLING=balance`: the most the call can cost held against the owner's balance before it, `hold_spend` in " +
        'one statement; paid through the ledger in the batched usage write after it). ' +
        `${settings.rounds} rounds of ${settings.durationS} s per case and level, the order alternating; medians over rounds; each ratio ` +
        `is per round, then the median. The billed case paid $${(spentMicros / 1e6).toFixed(6)} from the balance during the run.`,
      '',
      '| concurrency | case | req/s | p50 ms | mean ms | p99 ms | failures |',
      '|---:|---|---:|---:|---:|---:|---:|',
      ...rowsMd,
      '',
      ...lines,
    ].join('\n');
    return { name: 'billing', results, markdown };
  } finally {
    for (const app of apps) await app.close().catch(() => {});
    for (const p of platforms) await p.close().catch(() => {});
    await db?.close().catch(() => {});
    await database?.stop();
    await stopProcess(upstream.proc);
  }
}
