/**
 * The job runner (src/workers/job-runner.ts; docs/architecture.md "Workers") against a queue in
 * PostgreSQL: a table of its own, claimed the way the platform's queues are (FOR UPDATE SKIP
 * LOCKED, a lease in the row, every write fenced by the holder). Two runners on one table never
 * run a job twice; a job whose holder stopped answering is taken by the other once its lease
 * passes, and the late holder's outcome changes nothing; a live holder renews its lease and keeps
 * its job; stop() gives running work back; a failing job is retried with a doubling backoff and
 * given up after its last attempt.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { JobRunOutcome } from '../../src/lib/metrics.ts';
import { createJobRunner, type JobKind } from '../../src/workers/job-runner.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
const k = () => t.db.kysely;

beforeAll(async () => {
  t = await createTestDatabase();
  await sql`
    CREATE TABLE runner_jobs (
      id int PRIMARY KEY,
      state text NOT NULL DEFAULT 'pending',
      attempts int NOT NULL DEFAULT 0,
      run_after timestamptz NOT NULL DEFAULT now(),
      locked_by text,
      lease_until timestamptz,
      last_error text)`.execute(k());
});
afterAll(() => t?.drop());
beforeEach(async () => {
  await sql`TRUNCATE runner_jobs`.execute(k());
});

type Job = { id: number; attempts: number };
type Row = { id: number; state: string; attempts: number; locked_by: string | null; last_error: string | null };

const enqueue = (ids: number[]) => sql`INSERT INTO runner_jobs (id) SELECT unnest(${ids}::int[])`.execute(k());
const rows = async () => (await sql<Row>`SELECT id, state, attempts, locked_by, last_error FROM runner_jobs ORDER BY id`.execute(k())).rows;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A job kind over runner_jobs whose work is `work` (the test's), and the runs it saw. Claim,
 * renew and finish are SQL as the platform's repositories write theirs.
 */
function kind(work: (job: Job, signal: AbortSignal) => Promise<unknown>, over: Partial<JobKind<Job>> = {}) {
  const runs: { id: number; attempt: number; at: number }[] = [];
  const def: JobKind<Job> = {
    name: 'test_job',
    pollMs: 20,
    leaseMs: 60_000,
    concurrency: 4,
    async claim({ holder, leaseMs, limit }) {
      const r = await sql<Job>`
        UPDATE runner_jobs j SET attempts = j.attempts + 1, locked_by = ${holder},
               lease_until = now() + make_interval(secs => ${leaseMs / 1000})
         WHERE j.id IN (
           SELECT id FROM runner_jobs
            WHERE state = 'pending' AND run_after <= now() AND (lease_until IS NULL OR lease_until < now())
            ORDER BY id LIMIT ${limit}
            FOR UPDATE SKIP LOCKED)
        RETURNING j.id, j.attempts`.execute(k());
      return r.rows;
    },
    async run(job, signal) {
      runs.push({ id: job.id, attempt: job.attempts, at: Date.now() });
      return work(job, signal);
    },
    async renew(job, { holder, leaseMs }) {
      const r = await sql`
        UPDATE runner_jobs SET lease_until = now() + make_interval(secs => ${leaseMs / 1000})
         WHERE id = ${job.id} AND locked_by = ${holder} AND state = 'pending'`.execute(k());
      return Number(r.numAffectedRows) > 0;
    },
    async finish(job, outcome, holder) {
      const set =
        outcome.status === 'succeeded'
          ? sql`state = 'done', last_error = NULL`
          : outcome.status === 'retry'
            ? sql`last_error = ${outcome.error}, run_after = now() + make_interval(secs => ${outcome.retryInMs / 1000})`
            : outcome.status === 'failed'
              ? sql`state = 'failed', last_error = ${outcome.error}`
              : sql`attempts = attempts - 1`;
      const r = await sql`
        UPDATE runner_jobs SET ${set}, locked_by = NULL, lease_until = NULL
         WHERE id = ${job.id} AND locked_by = ${holder}`.execute(k());
      return Number(r.numAffectedRows) > 0;
    },
    attempt: (job) => job.attempts,
    describe: (job) => ({ id: job.id }),
    ...over,
  };
  return { kind: def, runs };
}

/** The outcomes a runner reported to its metrics. */
function observer() {
  const seen: JobRunOutcome[] = [];
  return { seen, metrics: { onJobRun: (_job: string, outcome: JobRunOutcome) => void seen.push(outcome) } };
}

describe('job runner', () => {
  it('two runners on one table run every job exactly once', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => i + 1);
    await enqueue(ids);
    const { kind: work, runs } = kind(() => sleep(Math.random() * 15));
    const a = createJobRunner(work, { holder: 'a' });
    const b = createJobRunner(work, { holder: 'b' });
    await Promise.all([a.start(), b.start()]);
    try {
      await expect.poll(async () => (await rows()).every((r) => r.state === 'done'), { timeout: 10_000, interval: 50 }).toBe(true);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(runs.map((r) => r.id).sort((x, y) => x - y)).toEqual(ids);
    expect((await rows()).every((r) => r.attempts === 1 && r.locked_by === null)).toBe(true);
  });

  it('a job whose holder stopped answering is taken by the other once its lease passes; the late holder records nothing', async () => {
    await enqueue([1]);
    // holder a claims the job and hangs (a process frozen mid-job: no renewal, no outcome)
    let wakeA!: () => void;
    const hung = kind(() => new Promise<void>((r) => (wakeA = r)), { leaseMs: 200, renew: undefined });
    const lateA = observer();
    const a = createJobRunner(hung.kind, { holder: 'a', metrics: lateA.metrics });
    const aDone = a.runOnce();
    await expect.poll(() => hung.runs.length).toBe(1);

    const rescue = kind(async () => {});
    const b = createJobRunner({ ...rescue.kind, leaseMs: 60_000 }, { holder: 'b' });
    expect(await b.runOnce()).toBe(0); // the lease is live: b does not take it
    await sleep(250);
    expect(await b.runOnce()).toBe(1);
    expect(await rows()).toMatchObject([{ state: 'done', attempts: 2, locked_by: null }]);

    // a wakes and finishes: fenced by the holder, its outcome is not written
    wakeA();
    await aDone;
    expect(lateA.seen).toEqual(['lost']);
    expect(await rows()).toMatchObject([{ state: 'done', attempts: 2, locked_by: null }]);
  });

  it('a live holder renews the lease of a job that outlasts it: the other runner never takes it', async () => {
    await enqueue([1]);
    const slow = kind(() => sleep(700), { leaseMs: 150 });
    const a = createJobRunner(slow.kind, { holder: 'a' });
    const b = createJobRunner(slow.kind, { holder: 'b' });
    const aDone = a.runOnce();
    await expect.poll(() => slow.runs.length).toBe(1);
    await b.start(); // polls every 20 ms while a's 700 ms job runs on a 150 ms lease
    try {
      expect(await aDone).toBe(1);
    } finally {
      await b.stop();
    }
    expect(slow.runs).toHaveLength(1);
    expect(await rows()).toMatchObject([{ state: 'done', attempts: 1, locked_by: null }]);
  });

  it('stop() aborts running jobs and gives them back: due at once, the attempt not counted', async () => {
    await enqueue([1, 2, 3]);
    const waiting = kind(
      (_job, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    );
    const seen = observer();
    const a = createJobRunner(waiting.kind, { holder: 'a', metrics: seen.metrics });
    await a.start();
    await expect.poll(() => waiting.runs.length).toBe(3);
    expect((await rows()).map((r) => r.locked_by)).toEqual(['a', 'a', 'a']);
    await a.stop();
    expect(seen.seen).toEqual(['released', 'released', 'released']);
    expect(await rows()).toMatchObject([1, 2, 3].map((id) => ({ id, state: 'pending', attempts: 0, locked_by: null })));

    // another runner takes them at once
    const b = createJobRunner(kind(async () => {}).kind, { holder: 'b' });
    expect(await b.runOnce()).toBe(3);
    expect((await rows()).map((r) => r.state)).toEqual(['done', 'done', 'done']);
  });

  it('a failing job is retried after a doubling backoff and given up after its last attempt', async () => {
    await enqueue([1, 2]);
    // job 1 always fails; job 2 fails once, then succeeds
    const failing = kind(async (job) => {
      if (job.id === 1 || job.attempts === 1) throw new Error(`attempt ${job.attempts} failed`);
    });
    const seen = observer();
    const a = createJobRunner(
      { ...failing.kind, pollMs: 5, retry: { baseMs: 100, maxAttempts: 3 } },
      { holder: 'a', metrics: seen.metrics },
    );
    await a.start();
    try {
      await expect.poll(async () => (await rows())[0]?.state, { timeout: 5000, interval: 20 }).toBe('failed');
      await sleep(400); // nothing is due any more: no fourth attempt
    } finally {
      await a.stop();
    }
    expect(await rows()).toMatchObject([
      { id: 1, state: 'failed', attempts: 3, last_error: 'attempt 3 failed', locked_by: null },
      { id: 2, state: 'done', attempts: 2, last_error: null },
    ]);
    const one = failing.runs.filter((r) => r.id === 1);
    expect(one.map((r) => r.attempt)).toEqual([1, 2, 3]);
    // attempt 1 waits 100 ms, attempt 2 waits 200 ms (the database's clock; a little slack for the poll)
    expect(one[1]!.at - one[0]!.at).toBeGreaterThanOrEqual(90);
    expect(one[2]!.at - one[1]!.at).toBeGreaterThanOrEqual(190);
    expect(seen.seen.filter((o) => o === 'retried')).toHaveLength(3); // two of job 1, one of job 2
    expect(seen.seen.filter((o) => o === 'failed')).toHaveLength(1);
  });

  it('a job whose lease is lost while it runs is aborted, and its outcome is not written', async () => {
    await enqueue([1]);
    let aborted = false;
    const lost = kind(
      (_job, signal) =>
        new Promise((_, reject) =>
          signal.addEventListener(
            'abort',
            () => {
              aborted = true;
              reject(signal.reason);
            },
            { once: true },
          ),
        ),
      { leaseMs: 150 },
    );
    const seen = observer();
    const a = createJobRunner(lost.kind, { holder: 'a', metrics: seen.metrics });
    const running = a.runOnce();
    await expect.poll(() => lost.runs.length).toBe(1);
    // another holder takes the row over (as after a lease that passed while a's database connection was gone)
    await sql`UPDATE runner_jobs SET locked_by = 'b', lease_until = now() + interval '1 minute'`.execute(k());
    await running;
    expect(aborted).toBe(true);
    expect(seen.seen).toEqual(['lost']);
    expect(await rows()).toMatchObject([{ state: 'pending', attempts: 1, locked_by: 'b' }]);
  });
});
