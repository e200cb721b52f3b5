/** Deployment jobs on the job runner: FOR UPDATE SKIP LOCKED between workers, lease expiry after a crash, fencing, a stop that gives the job back. */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertAgentRecord } from '../../src/domains/agents/agent-records.service.ts';
import { deploymentsRepo } from '../../src/domains/agents/deployments/deployments.repo.ts';
import { createDeploymentJobs } from '../../src/domains/agents/deployments/deployments.service.ts';
import { createLifecycleLocks } from '../../src/domains/agents/lifecycle-locks.service.ts';
import { createDeploymentWorker } from '../../src/workers/deployments.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { TEST_SECRETS } from '../helpers/platform.ts';
import { createFakeDriver } from './fake-driver.ts';

let t: TestDatabase;
let userId: string;
const config = { AGENTS_DOMAIN: 'agents.test', BACKEND_URL: 'http://127.0.0.1:9', configured: { hosting: true } } as never;

beforeAll(async () => {
  t = await createTestDatabase();
  userId = (
    await t.db.kysely
      .insertInto('users')
      .values({ email: 'w@example.com', name: 'w', password_hash: null, referral_code: 'W1' })
      .returning('id')
      .executeTakeFirstOrThrow()
  ).id;
});
afterAll(() => t.drop());

async function newJobs(n: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const a = await t.db.withUser(userId, (trx) =>
      insertAgentRecord(
        trx,
        { agentsDomain: 'agents.test', secretsKey: TEST_SECRETS.secretsEncryptionKey },
        { userId, name: `job ${i}`, status: 'provisioning', plan: 'network' },
      ),
    );
    await deploymentsRepo.enqueueDeploy(t.db.kysely, a.id, userId, 3);
    ids.push(a.id);
  }
  return ids;
}

describe('deployment worker', () => {
  it('two workers racing on the same queue deploy each agent exactly once', async () => {
    const driver = createFakeDriver();
    driver.deployDelayMs = 20;
    const deployments = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver });
    const ids = await newJobs(12);
    const workers = [createDeploymentWorker({ deployments, workerId: 'w1' }), createDeploymentWorker({ deployments, workerId: 'w2' })];
    // each worker drains with 3 concurrent loops: 6 takers compete for 12 jobs
    const drain = async (w: (typeof workers)[number]) => {
      while (await w.runOnce());
    };
    await Promise.all(workers.flatMap((w) => [drain(w), drain(w), drain(w)]));

    const perAgent = new Map<string, number>();
    for (const s of driver.deploys) perAgent.set(s.agentId, (perAgent.get(s.agentId) ?? 0) + 1);
    for (const id of ids) expect(perAgent.get(id)).toBe(1);
    const jobs = await t.db.kysely
      .selectFrom('deployments')
      .select(['status', 'attempts', 'agent_id'])
      .where('agent_id', 'in', ids)
      .execute();
    expect(jobs.every((j) => j.status === 'succeeded' && j.attempts === 1)).toBe(true);
    const agentsRows = await t.db.kysely.selectFrom('agents').select('status').where('id', 'in', ids).execute();
    expect(agentsRows.every((a) => a.status === 'running')).toBe(true);
  });

  it('one active job per agent: enqueueing twice returns the same job', async () => {
    const [id] = await newJobs(1);
    const a = await deploymentsRepo.enqueueDeploy(t.db.kysely, id!, userId, 3);
    const b = await deploymentsRepo.enqueueDeploy(t.db.kysely, id!, userId, 3);
    expect(b.id).toBe(a.id);
    await t.db.kysely.deleteFrom('deployments').where('agent_id', '=', id!).execute();
  });

  it('a job whose worker crashed mid-deploy (lease expired) is taken again and finished', async () => {
    const [id] = await newJobs(1);
    // a worker took the job, then died: status running, lease in the past
    await t.db.kysely
      .updateTable('deployments')
      .set({ status: 'running', attempts: 1, locked_by: 'dead-worker', lease_until: sql<Date>`now() - interval '1 second'` })
      .where('agent_id', '=', id!)
      .execute();
    const driver = createFakeDriver();
    const deployments = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver });
    const w = createDeploymentWorker({ deployments, workerId: 'rescuer' });
    expect(await w.runOnce()).toBe(1);
    const job = await t.db.kysely.selectFrom('deployments').selectAll().where('agent_id', '=', id!).executeTakeFirstOrThrow();
    expect(job).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(driver.deploys.map((s) => s.agentId)).toEqual([id]);
    // the dead worker cannot overwrite the outcome (fencing by locked_by)
    expect(await deployments.finish({ ...job, agent_id: id! }, 'dead-worker', { status: 'failed', error: 'late' })).toBe(false);
  });

  it('a job with a live lease is not taken by another worker; the holder renews it', async () => {
    const [id] = await newJobs(1);
    const deployments = createDeploymentJobs({
      db: t.db,
      config,
      secrets: TEST_SECRETS,
      locks: createLifecycleLocks(),
      driver: createFakeDriver(),
    });
    const [taken] = await deployments.claim('holder', 60_000, 4);
    expect(taken?.agent_id).toBe(id);
    expect(await deployments.claim('other', 60_000, 4)).toEqual([]);
    expect(await deployments.renew(taken!, 'holder', 60_000)).toBe(true);
    expect(await deployments.renew(taken!, 'other', 60_000)).toBe(false);
    expect(await deployments.finish(taken!, 'other', { status: 'succeeded', result: { skipped: true } })).toBe(false);
    expect(await deployments.finish(taken!, 'holder', { status: 'succeeded', result: { skipped: true } })).toBe(true);
  });

  it('a worker stopped mid-deploy gives its job back: queued, due at once, the attempt not counted', async () => {
    const [id] = await newJobs(1);
    const driver = createFakeDriver();
    // the unit is deployed but never answers /healthz: the deploy waits for health until the stop aborts it
    const deploy = driver.deploy.bind(driver);
    driver.deploy = async (spec) => ({ ...(await deploy(spec)), status: 'starting' });
    const deployments = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver });
    const w = createDeploymentWorker({ deployments, workerId: 'leaving', pollMs: 10 });
    await w.start();
    const job = () => t.db.kysely.selectFrom('deployments').selectAll().where('agent_id', '=', id!).executeTakeFirstOrThrow();
    await expect.poll(() => driver.deploys.some((d) => d.agentId === id), { timeout: 5000 }).toBe(true);
    expect(await job()).toMatchObject({ status: 'running', attempts: 1, locked_by: 'leaving' });
    await w.stop();
    expect(await job()).toMatchObject({ status: 'queued', attempts: 0, locked_by: null, lease_until: null, last_error: 'worker stopped' });
    await t.db.kysely.deleteFrom('deployments').where('agent_id', '=', id!).execute();
  });

  it('start-up reconciliation re-deploys agents marked running whose unit is gone', async () => {
    const [id] = await newJobs(1);
    const driver = createFakeDriver();
    const deployments = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver });
    const w = createDeploymentWorker({ deployments, workerId: 'first' });
    while (await w.runOnce());
    expect(driver.units.has(id!)).toBe(true);

    // "platform restart": a new driver that has no units
    const fresh = createFakeDriver();
    const deployments2 = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: fresh });
    expect(await deployments2.reconcile()).toBeGreaterThanOrEqual(1);
    const w2 = createDeploymentWorker({ deployments: deployments2, workerId: 'second' });
    while (await w2.runOnce());
    expect(fresh.units.has(id!)).toBe(true);
    expect((await t.db.kysely.selectFrom('agents').select('status').where('id', '=', id!).executeTakeFirstOrThrow()).status).toBe(
      'running',
    );
  });

  it('reconciliation: a local unit that still answers is launched again (the killed platform left it), a remote one is kept', async () => {
    const [id] = await newJobs(1);
    const first = createFakeDriver();
    const w = createDeploymentWorker({
      deployments: createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: first }),
    });
    while (await w.runOnce());
    const status = async () =>
      (await t.db.kysely.selectFrom('agents').select('status').where('id', '=', id!).executeTakeFirstOrThrow()).status;
    expect(await status()).toBe('running');

    // a remote platform's unit runs on without the platform: nothing to do
    const remote = Object.assign(createFakeDriver(), { kind: 'render' as const });
    remote.units.set(id!, { ...first.units.get(id!)! });
    await createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: remote }).reconcile();
    expect(await status()).toBe('running');
    expect(remote.calls.filter((c) => c.agentId === id).map((c) => c.op)).toEqual(['status']);

    // a local process left by a killed platform answers, but is not this platform's: deployed again,
    // and `provisioning` until that deploy has it answering
    const local = createFakeDriver();
    local.units.set(id!, { ...first.units.get(id!)! });
    const deployments = createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: local });
    expect(await deployments.reconcile()).toBeGreaterThanOrEqual(1);
    expect(await status()).toBe('provisioning');
    const w2 = createDeploymentWorker({ deployments });
    while (await w2.runOnce());
    expect(local.deploys.map((d) => d.agentId)).toContain(id);
    expect(await status()).toBe('running');

    // the platform stops and its agent's process with it: the agent no longer reads `running`
    local.units.get(id!)!.status = 'stopped';
    expect(await deployments.settleAfterShutdown()).toBeGreaterThanOrEqual(1);
    expect(await status()).toBe('provisioning');
  });
  it("start-up reconciliation names only processes that exist: a clean restart in one line, a killed platform's leftovers as such", async () => {
    const [clean, orphan, stoppedGone, stoppedLeft] = await newJobs(4);
    const first = createFakeDriver();
    const w = createDeploymentWorker({
      deployments: createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: first }),
    });
    while (await w.runOnce());
    const setStatus = (id: string, status: 'provisioning' | 'stopped') =>
      t.db.kysely.updateTable('agents').set({ status }).where('id', '=', id).execute();
    // the next platform's view: the clean stop marked its agent provisioning and left no process; a
    // killed platform's agent still runs; a stopped agent's state file names a process long gone;
    // another stopped agent's process was left running by a killed platform
    await setStatus(clean!, 'provisioning');
    await setStatus(stoppedGone!, 'stopped');
    await setStatus(stoppedLeft!, 'stopped');
    const next = createFakeDriver();
    next.units.set(orphan!, { ...first.units.get(orphan!)! });
    next.units.set(stoppedGone!, { ...first.units.get(stoppedGone!)!, status: 'stopped' });
    next.units.set(stoppedLeft!, { ...first.units.get(stoppedLeft!)! });
    const lines: { msg: string; agents: string[] }[] = [];
    await createDeploymentJobs({ db: t.db, config, secrets: TEST_SECRETS, locks: createLifecycleLocks(), driver: next }).reconcile(
      (msg, extra) => lines.push({ msg, agents: (extra.agents as string[] | undefined) ?? [String(extra.agentId)] }),
    );
    const naming = (id: string) => lines.filter((l) => l.agents.includes(id)).map((l) => l.msg);
    expect(naming(clean!)).toEqual([expect.stringMatching(/^starting \d+ agents? again after a clean restart$/)]);
    expect(naming(orphan!)).toEqual([
      expect.stringMatching(/^replacing 1 agent process left running by a platform that was killed or crashed$/),
    ]);
    expect(naming(stoppedLeft!)).toEqual([
      expect.stringMatching(/^stopped 1 agent process a platform that was killed or crashed left running for stopped agents$/),
    ]);
    expect(naming(stoppedGone!)).toEqual([]);
    expect(next.calls.filter((c) => c.op === 'stop').map((c) => c.agentId)).toEqual([stoppedLeft]);
    expect(lines.map((l) => l.msg).join('\n')).not.toMatch(/previous platform|redeploy queued/);
  });
});
