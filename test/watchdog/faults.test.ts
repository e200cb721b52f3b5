/**
 * Fault tests of the watchdog (§3 "Watchdog lifecycle", §6 "Watchdog notifications", §8 watchdog
 * defaults) with real agent processes on the local driver: a SIGKILLed agent is repaired and
 * answers chat again; a runtime that exits at start every time ends in `crash_loop` with one
 * crash-loop notification and no further restarts; a SIGSTOPped agent (port open, silent) is
 * found unhealthy by the probe timeout and repaired. Timings are scaled down (test/watchdog/helpers.ts).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../src/domains/agents/drivers/local/containment/proc.service.ts';
import { eventually } from '../agents/helpers.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { type FakeTelegram, startFakeTelegram } from '../fakes/telegram.ts';
import { type FakeWebhook, startFakeWebhook } from '../fakes/webhook.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import {
  BOT_TOKEN,
  CHAT_ID,
  chat,
  deployAgent,
  FAST,
  pidOf,
  type RunningPlatform,
  sleep,
  startPlatform,
  waitForState,
  watchdogView,
} from './helpers.ts';

let database: TestDatabase;
let dataDir: string;
let upstream: FakeOpenAi;
let telegram: FakeTelegram;
let webhook: FakeWebhook;
let p: RunningPlatform;

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'watchdog-faults-'));
  upstream = await startFakeOpenAi({ apiKey: 'router-key' });
  telegram = await startFakeTelegram({ token: BOT_TOKEN });
  webhook = await startFakeWebhook();
  p = await startPlatform({
    db: database.db,
    dataDir,
    env: {
      ROUTER_BASE_URL: upstream.baseUrl,
      ROUTER_API_KEY: 'router-key',
      WATCHDOG_BOT_TOKEN: BOT_TOKEN,
      WATCHDOG_ADMIN_CHAT_ID: CHAT_ID,
      WATCHDOG_BOT_API_URL: telegram.apiUrl,
      WATCHDOG_WEBHOOK_URL: webhook.url,
    },
  });
}, 60_000);

afterAll(async () => {
  await p?.close();
  await p?.driver.shutdown();
  await Promise.allSettled([upstream?.close(), telegram?.close(), webhook?.close()]);
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const telegramFor = (agentId: string) => telegram.messages.filter((m) => m.text.includes(agentId));
const webhookFor = (agentId: string) => webhook.received.filter((m) => m.agentId === agentId);

describe('watchdog faults (local driver, real processes)', () => {
  it('SIGKILL: detected, repaired, running again and answers chat; one notification per step', async () => {
    const { agentId, owner, token } = await deployAgent(p, database.db);
    await waitForState(p, agentId, owner.id, 'running');
    const before = pidOf(dataDir, agentId);
    process.kill(before, 'SIGKILL');

    await eventually(
      async () => {
        const v = await watchdogView(p, agentId, owner.id);
        return v.state === 'running' && v.history.some((h) => h.kind === 'repair' && h.ok) ? v : null;
      },
      30_000,
      50,
    );
    const after = pidOf(dataDir, agentId);
    expect(after).not.toBe(before);
    expect(isAlive(after)).toBe(true);
    const reply = await chat(database.db, agentId, token, 'are you back?');
    expect(reply.status).toBe(200);
    expect(reply.body.choices![0]!.message.content).toContain('are you back?');

    const v = await watchdogView(p, agentId, owner.id);
    const path = v.history
      .filter((h) => h.kind === 'transition')
      .map((h) => h.to)
      .reverse();
    expect(path).toEqual(['starting', 'running', 'degraded', 'repairing', 'running']);
    expect(v.history.filter((h) => h.kind === 'crash')).toHaveLength(1);
    expect(v.history.filter((h) => h.kind === 'repair')).toEqual([expect.objectContaining({ attempt: 1, ok: true })]);

    // §6: degraded and the repair attempt, once each, on both channels
    await eventually(async () => telegramFor(agentId).length >= 2 && webhookFor(agentId).length >= 2, 10_000);
    await sleep(FAST.checkIntervalMs! * 3);
    expect(telegramFor(agentId).map((m) => m.chatId)).toEqual([CHAT_ID, CHAT_ID]);
    expect(telegramFor(agentId)[0]!.text).toMatch(/degraded/);
    expect(telegramFor(agentId)[1]!.text).toMatch(/repair attempt 1\/2 succeeded/);
    expect(webhookFor(agentId).map((m) => m.event)).toEqual(['degraded', 'repair_attempt']);
    expect(webhookFor(agentId)[1]).toMatchObject({ type: 'watchdog', agentId, attempt: 1, ok: true });
    // the state is visible in the agent's own response
    const agent = (
      await p.backend.inject({
        method: 'GET',
        url: `/api/agents/${agentId}`,
        headers: { authorization: 'Bearer watchdog-internal-key', 'x-user-id': owner.id },
      })
    ).json();
    expect(agent.watchdog).toMatchObject({ state: 'running' });
  }, 60_000);

  it('a runtime that exits at start every time: crash_loop after the threshold, one crash-loop notification, no hot loop', async () => {
    const { agentId, owner } = await deployAgent(p, database.db);
    await waitForState(p, agentId, owner.id, 'running');
    // the runtime writes its configuration file at start; a directory in its place makes every start fail
    const configFile = join(dataDir, 'agents', agentId, 'workspace', 'openclaw.json');
    rmSync(configFile, { force: true });
    mkdirSync(configFile);
    process.kill(pidOf(dataDir, agentId), 'SIGKILL');

    const v = await waitForState(p, agentId, owner.id, 'crash_loop', 60_000);
    const repairs = v.history.filter((h) => h.kind === 'repair');
    expect(repairs.map((r) => r.ok)).toEqual([false, false]);
    expect(v.history.filter((h) => h.kind === 'crash').length).toBeGreaterThanOrEqual(3);
    expect(v.history.filter((h) => h.to === 'crash_loop')).toHaveLength(1);

    // no restarts once in the loop: several check intervals later nothing more was tried
    const pid = pidOf(dataDir, agentId);
    await sleep(FAST.checkIntervalMs! * 6);
    const later = await watchdogView(p, agentId, owner.id);
    expect(later.state).toBe('crash_loop');
    expect(later.history.filter((h) => h.kind === 'repair')).toHaveLength(2);
    expect(pidOf(dataDir, agentId)).toBe(pid);

    await eventually(async () => webhookFor(agentId).some((m) => m.event === 'crash_loop'), 10_000);
    await sleep(300);
    expect(webhookFor(agentId).filter((m) => m.event === 'crash_loop')).toHaveLength(1);
    expect(telegramFor(agentId).filter((m) => /crash loop/.test(m.text))).toHaveLength(1);
    expect(webhookFor(agentId).map((m) => m.event)).toEqual(['degraded', 'repair_attempt', 'repair_attempt', 'crash_loop']);
  }, 90_000);

  it('SIGSTOP (port open, silent): unhealthy by the probe timeout, repaired', async () => {
    const { agentId, owner, token } = await deployAgent(p, database.db);
    await waitForState(p, agentId, owner.id, 'running');
    const pid = pidOf(dataDir, agentId);
    process.kill(pid, 'SIGSTOP');
    try {
      const degradedAt = Date.now();
      await eventually(async () => (await watchdogView(p, agentId, owner.id)).history.some((h) => h.to === 'degraded'), 10_000, 20);
      // the probe waited its whole timeout for an answer that never came
      expect(Date.now() - degradedAt).toBeGreaterThanOrEqual(FAST.probeTimeoutMs! - 100);
      await eventually(
        async () => {
          const v = await watchdogView(p, agentId, owner.id);
          return v.state === 'running' && v.history.some((h) => h.kind === 'repair' && h.ok);
        },
        30_000,
        50,
      );
    } finally {
      if (isAlive(pid)) process.kill(pid, 'SIGCONT');
    }
    expect(pidOf(dataDir, agentId)).not.toBe(pid);
    expect((await chat(database.db, agentId, token, 'hello again')).status).toBe(200);
  }, 60_000);
});
