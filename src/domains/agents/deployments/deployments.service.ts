/**
 * Deployment jobs of the backend (§4.18 POST /api/deployments, §3 provisioning): requesting a
 * deployment (creating or taking the agent and enqueueing its job in one transaction), the queue's
 * side of the worker (src/workers/deployments.ts: claim, renew, run, finish), and start-up
 * reconciliation. Built on its own in src/platform.ts and given to the worker and to the routes
 * of deployments.
 */
import { LIMITS } from '../../../config/limits.ts';
import { isUniqueViolation } from '../../../db/errors.ts';
import type { AgentStatus } from '../../../db/schema.ts';
import { decryptSecret } from '../../../lib/crypto.ts';
import { AppError, badRequest, notFound } from '../../../lib/errors.ts';
import type { JobOutcome } from '../../../lib/jobs.ts';
import { waitForHealthy } from '../agent-client/health-probe.client.ts';
import {
  type AgentsDeps,
  BACKEND_DEFAULT_PLAN,
  backendAgent,
  backendLimit,
  deploymentView,
  hostingError,
  insertAgentRecord,
  limitReached,
} from '../agent-records.service.ts';
import { type AgentRow, agentsRepo } from '../agents.repo.ts';
import { openChannelSecrets, sealChannelSecrets } from '../channel-secrets.rules.ts';
import { newPlatformKey } from '../credentials.rules.ts';
import { type ContainerStatus, HostingUnavailableError } from '../drivers/driver.contract.ts';
import { skillLimitProblem } from '../drivers/openclaw-config.rules.ts';
import { type ClaimedJob, deploymentsRepo } from './deployments.repo.ts';

export type { ClaimedJob } from './deployments.repo.ts';

/** What one deploy run did: nothing (the agent is gone), or the agent's health when it was marked running. */
export type DeployResult = { skipped: true } | { skipped: false; health: ContainerStatus; repositoryError?: string };

const gitUnavailable = () =>
  new AppError(
    'GIT_UNAVAILABLE',
    "gitInit needs git to run as the agent in its sandbox (bubblewrap, and the agent's workspace on this machine): without it git would run with the platform's rights in a folder the agent controls. Provision without gitInit.",
  );

/** Driver states of a unit whose process (or container, pod, service) runs. */
const UP = new Set<ContainerStatus>(['healthy', 'starting', 'running']);
const count = (ids: string[], one: string, many = `${one}s`) => `${ids.length} ${ids.length === 1 ? one : many}`;

/** The configuration with the platform's channel settings over its own `channels` (OpenClaw runs them itself). */
const withChannels = (config: Record<string, unknown>, channels: Record<string, unknown> | undefined) =>
  channels ? { ...config, channels: { ...(config.channels as Record<string, unknown> | undefined), ...channels } } : config;

export function createDeploymentJobs(deps: AgentsDeps) {
  const { db, config, driver, locks } = deps;
  const hostingAvailable = () => config.configured.hosting;
  const stillWanted = async (agentId: string, wanted: AgentStatus[]) => {
    const a = await agentsRepo.findAgent(db.kysely, agentId);
    return a !== undefined && wanted.includes(a.status);
  };
  /**
   * The local driver's units are processes of this machine that its shutdown() stops with the
   * platform; remote drivers' units run on without it (docs/configuration.md "Starting and stopping").
   */
  const unitsEndWithPlatform = driver.kind === 'local';
  const unitStatus = (agentId: string) =>
    driver.status(agentId).then(
      (r) => r.status,
      () => 'error' as const,
    );

  return {
    /**
     * POST /api/deployments: creates the agent (or takes the existing one the web app created)
     * and enqueues its deploy job. 500 when hosting is unavailable; 402 over the plan limit.
     */
    async requestDeployment(input: {
      userId: string;
      agentId?: string | undefined;
      name: string;
      plan?: string | undefined;
      /** the plan whose agent limit applies (default `plan`): the web app names the admin's own plan */
      limitPlan?: string | undefined;
      model?: string | undefined;
      aiProvider?: string | undefined;
      config?: Record<string, unknown> | undefined;
      /** make the new workspace a git repository with a first commit (docs/agents.md "A repository from the start") */
      gitInit?: boolean | undefined;
    }) {
      if (!hostingAvailable()) throw hostingError();
      // a new agent, or a model named: one routable model (docs/agents.md "Model"); a redeploy naming none keeps its own
      const model =
        deps.chooseModel && (input.model !== undefined || input.agentId === undefined)
          ? await deps.chooseModel(input.userId, input.model)
          : input.model;
      // One transaction that takes the user's row lock first: concurrent requests for one agent (or
      // one user) run one after another, so the second finds the first's agent and joins its active
      // job (the partial unique index on deployments), instead of two transactions locking the user
      // row and the agent row in opposite orders (a deadlock, answered 500).
      const { agent, job } = await db
        .withUser(input.userId, async (trx) => {
          if (!(await agentsRepo.lockUser(trx, input.userId))) throw notFound('User not found');
          const existing = input.agentId ? await agentsRepo.findAgent(trx, input.agentId) : undefined;
          let row: AgentRow;
          if (existing) {
            const plan = input.plan ?? existing.plan;
            // §2 skill limit of the plan the agent will be on
            const skills = input.config ? skillLimitProblem(input.config, plan) : undefined;
            if (skills) throw badRequest(skills);
            const others = await agentsRepo.countAgents(trx, input.userId, existing.id);
            const limitPlan = input.limitPlan ?? plan;
            const limit = backendLimit(limitPlan);
            if (others >= limit) throw limitReached(limitPlan, limit, others);
            row =
              (await agentsRepo.updateAgent(trx, existing.id, {
                plan,
                status: 'provisioning',
                ...(model ? { model } : {}),
                ...(input.aiProvider ? { ai_provider: input.aiProvider } : {}),
                ...(input.config
                  ? {
                      config: sealChannelSecrets(
                        input.config,
                        existing.config as Record<string, unknown>,
                        deps.secrets.secretsEncryptionKey,
                      ),
                    }
                  : {}),
              })) ?? existing;
          } else {
            const plan = input.plan ?? BACKEND_DEFAULT_PLAN;
            const current = await agentsRepo.countAgents(trx, input.userId);
            const limitPlan = input.limitPlan ?? plan;
            const limit = backendLimit(limitPlan);
            if (current >= limit) throw limitReached(limitPlan, limit, current);
            row = await insertAgentRecord(
              trx,
              { agentsDomain: config.AGENTS_DOMAIN, secretsKey: deps.secrets.secretsEncryptionKey },
              {
                ...(input.agentId ? { id: input.agentId } : {}),
                userId: input.userId,
                name: input.name,
                plan,
                model,
                aiProvider: input.aiProvider,
                config: input.config,
                status: 'provisioning',
              },
            );
          }
          // asked for but impossible here (git would have to run with the platform's rights): refused, nothing made
          if (input.gitInit && !deps.repositories?.available(row.id)) throw gitUnavailable();
          const gitInit = input.gitInit === true;
          return {
            agent: row,
            job: await deploymentsRepo.enqueueDeploy(trx, row.id, input.userId, LIMITS.deploymentMaxAttempts, { gitInit }),
          };
        })
        .catch((err: unknown) => {
          // `agentId` names an agent of another user (invisible under row-level security, so the insert
          // collides with it): answered exactly like a missing agent, never as a 500 that reveals it
          if (input.agentId && isUniqueViolation(err)) throw notFound('Agent not found');
          throw err;
        });
      deps.onEnqueue?.();
      return { deployment: deploymentView(job), agent: backendAgent({ ...agent, status: 'provisioning' }) };
    },

    async getDeployment(userId: string, jobId: string) {
      const j = await db.withUser(userId, (trx) => deploymentsRepo.getJob(trx, jobId));
      if (!j) throw notFound('Deployment not found');
      return deploymentView(j);
    },

    /**
     * Runs one deploy job the worker holds: rotates the platform key, deploys with the agent's own
     * credentials and its stored configuration, waits for health (§4.12: poll every 2 s, 60 s
     * overall) and marks it running. Throws on failure; the worker decides between retry and `error`.
     *
     * The deploy is a lifecycle transition (lifecycle-locks.service.ts): it is made only while the
     * agent is still wanted (`provisioning`; `running` for a watchdog repair, `repair`), and the agent
     * is marked running only if it still is, so a Stop that arrives meanwhile wins (its stop reaches
     * the driver after this deploy) and the job ends without marking anything (`skipped`).
     */
    async runJob(
      job: { agent_id: string; user_id: string; git_init?: boolean },
      signal?: AbortSignal,
      options: { repair?: boolean } = {},
    ): Promise<DeployResult> {
      const wanted: AgentStatus[] = options.repair ? ['running'] : ['provisioning'];
      if (!hostingAvailable()) throw new HostingUnavailableError('hosting driver not configured');
      const started = await locks.run(job.agent_id, async () => {
        const agent = await agentsRepo.findAgent(db.kysely, job.agent_id);
        if (!agent || !wanted.includes(agent.status)) return undefined;
        const creds = await agentsRepo.getCredentials(db.kysely, agent.id);
        if (!creds) throw new Error(`agent ${agent.id} has no credentials`);
        const sandboxUid = await agentsRepo.sandboxUid(db.kysely, agent.id);
        const runtimeChannels = await deps.runtimeChannels?.(agent.id);
        const platformKey = newPlatformKey();
        await agentsRepo.setPlatformKey(db.kysely, agent.id, platformKey.hash, platformKey.prefix);
        deps.platformKeyCache?.evictKey(agent.id); // the previous key dies with this deploy
        const deployment = driver.deploy({
          agentId: agent.id,
          userId: agent.user_id,
          plan: agent.plan,
          gatewayToken: decryptSecret(deps.secrets.secretsEncryptionKey, creds.gateway_token_enc),
          platformApiKey: platformKey.key,
          backendUrl: config.BACKEND_URL,
          ...(sandboxUid !== undefined ? { sandboxUid } : {}),
          // the agent itself gets its channel secrets in clear (channel-secrets.rules.ts)
          config: {
            ...withChannels(
              openChannelSecrets((agent.config ?? {}) as Record<string, unknown>, deps.secrets.secretsEncryptionKey),
              runtimeChannels,
            ),
            model: agent.model,
            aiProvider: agent.ai_provider,
            name: agent.name,
          },
          env: deps.runtimeEnv?.(agent, { platformApiKey: platformKey.key }) ?? {},
        });
        deployment.catch(() => {}); // awaited below, once the lock is let go
        return { agent, deployment };
      });
      if (!started) return { skipped: true };
      const { agent } = started;
      const deployment = await started.deployment;
      // §4.12: poll /healthz every 2 s, 60 s overall. Silent after that but alive is §3 `starting`:
      // the agent counts as running and the watchdog takes over; a dead unit fails the attempt.
      let health: ContainerStatus = deployment.status;
      if (health !== 'healthy') {
        health = (await waitForHealthy(deployment.url, signal ? { signal } : {})) ? 'healthy' : (await driver.status(agent.id)).status;
        if (signal?.aborted) throw signal.reason ?? new Error('aborted');
        if (health === 'error' || health === 'stopped' || health === 'not_found') {
          // stopped (or deleted) meanwhile: not a failure of the deploy
          if (!(await stillWanted(agent.id, wanted))) return { skipped: true };
          throw new Error(`agent failed to start (${health})`);
        }
      }
      // the workspace exists now: made a repository before the agent reads `running`, so the Files
      // tab never shows it otherwise; a failure leaves a running agent and says why (the job's lastError)
      let repositoryError: string | undefined;
      if (job.git_init && deps.repositories)
        repositoryError = await deps.repositories.initialise(agent.id).then(
          () => undefined,
          (err: Error) => err.message || String(err),
        );
      const marked = await locks.run(agent.id, () =>
        agentsRepo.setStatusIf(db.kysely, agent.id, wanted, {
          status: 'running',
          gateway_url: deployment.url,
          external_id: deployment.externalId,
          started_at: new Date(),
        }),
      );
      if (!marked) return { skipped: true };
      return repositoryError === undefined ? { skipped: false, health } : { skipped: false, health, repositoryError };
    },

    /**
     * The worker's claim (owner connection: it serves every user): up to `limit` due jobs — queued
     * and due, or running with a lease that passed (their worker died) — leased to `holder`.
     */
    async claim(holder: string, leaseMs: number, limit = 1): Promise<ClaimedJob[]> {
      const jobs: ClaimedJob[] = [];
      while (jobs.length < limit) {
        const job = await deploymentsRepo.takeJob(db.kysely, holder, leaseMs);
        if (!job) break;
        jobs.push(job);
      }
      return jobs;
    },

    /** Extends the lease of a job `holder` runs; false when another worker has taken it over. */
    renew(job: Pick<ClaimedJob, 'id'>, holder: string, leaseMs: number): Promise<boolean> {
      return deploymentsRepo.renewLease(db.kysely, job.id, holder, leaseMs);
    },

    /**
     * Records the outcome of a run, fenced by `holder` (false, and nothing written, when the
     * holder lost the job): succeeded; queued again after a backoff; failed for good, and then
     * the agent shows `error` (§3 provisioning → error); or given back by a stopping worker,
     * due at once with its attempt not counted.
     */
    async finish(job: ClaimedJob, holder: string, outcome: JobOutcome<DeployResult>): Promise<boolean> {
      switch (outcome.status) {
        case 'succeeded': {
          const r = outcome.result;
          const error = r.skipped ? undefined : r.repositoryError;
          return deploymentsRepo.finishJob(db.kysely, job.id, holder, { status: 'succeeded', ...(error ? { error } : {}) });
        }
        case 'retry':
          return deploymentsRepo.finishJob(db.kysely, job.id, holder, {
            status: 'queued',
            error: outcome.error,
            retryInMs: outcome.retryInMs,
          });
        case 'released':
          return deploymentsRepo.finishJob(db.kysely, job.id, holder, { status: 'queued', error: 'worker stopped', uncount: true });
        case 'failed': {
          const owned = await deploymentsRepo.finishJob(db.kysely, job.id, holder, { status: 'failed', error: outcome.error });
          if (owned) await agentsRepo.updateAgent(db.kysely, job.agent_id, { status: 'error' });
          return owned;
        }
      }
    },

    /**
     * Start-up reconciliation of agents the database says run (or are being provisioned): each is
     * deployed again when its unit is gone, and reads `provisioning` until its job has it answering
     * (§4.12), never `running` before anything runs.
     *
     * With the local driver every one of them is deployed again, even one whose process still
     * answers: such a process was left by a platform that was killed, and only a launch by this
     * platform, from the stored spec (the deploy stops the old process first), makes it one this
     * platform stops at shutdown. Processes left running for agents that are stopped or failed are
     * stopped. The partial unique index keeps N replicas starting together from enqueueing twice.
     *
     * What it logs names only processes that exist (docs/agents.md "Start-up and shutdown"): one line
     * for the agents started again after a clean restart (the previous platform stopped them), one
     * for those whose process had ended while no platform ran, and one for each kind of process a
     * platform that was killed left behind. Returns how many agents it queued.
     */
    async reconcile(log?: (msg: string, extra: Record<string, unknown>) => void) {
      if (!hostingAvailable()) return 0;
      const wanted = await agentsRepo.listAllAgents(db.kysely, { status: ['running', 'provisioning'], limit: 10_000 });
      const afterCleanStop: string[] = [];
      const ended: string[] = [];
      const leftRunning: string[] = [];
      for (const a of wanted) {
        const s = await unitStatus(a.id);
        const runs = UP.has(s);
        if (runs && !unitsEndWithPlatform) continue; // a remote unit runs on without the platform
        await deploymentsRepo.enqueueDeploy(db.kysely, a.id, a.user_id, LIMITS.deploymentMaxAttempts);
        await agentsRepo.updateAgent(db.kysely, a.id, { status: 'provisioning' });
        if (!unitsEndWithPlatform) log?.('agent redeploy queued: its unit is gone', { agentId: a.id, was: s });
        // settleAfterShutdown() marked the agents a clean stop ended `provisioning`
        else if (!runs) (a.status === 'provisioning' ? afterCleanStop : ended).push(a.id);
        else leftRunning.push(a.id);
      }
      const queued = afterCleanStop.length + ended.length + leftRunning.length;
      if (afterCleanStop.length)
        log?.(`starting ${count(afterCleanStop, 'agent')} again after a clean restart`, { agents: afterCleanStop });
      if (ended.length)
        log?.(`starting ${count(ended, 'agent')} again whose process had ended while the platform was not running`, { agents: ended });
      if (leftRunning.length)
        log?.(`replacing ${count(leftRunning, 'agent process', 'agent processes')} left running by a platform that was killed or crashed`, {
          agents: leftRunning,
        });
      if (queued > 0) deps.onEnqueue?.();
      if (unitsEndWithPlatform && driver.stop) {
        const stopped: string[] = [];
        for (const a of await agentsRepo.listAllAgents(db.kysely, { status: ['stopped', 'error'], limit: 10_000 })) {
          // only a process that exists: a stopped agent's state file may still name one long gone
          if (!UP.has(await unitStatus(a.id))) continue;
          await driver.stop(a.id).catch(() => {});
          stopped.push(a.id);
        }
        if (stopped.length)
          log?.(
            `stopped ${count(stopped, 'agent process', 'agent processes')} a platform that was killed or crashed left running for stopped agents`,
            {
              agents: stopped,
            },
          );
      }
      return queued;
    },

    /**
     * After the driver's shutdown() stopped this platform's agents (local driver): those the
     * database still says run but whose process is gone read `provisioning`, which the next start
     * deploys (reconcile). Agents another platform process on the same data runs still answer and
     * keep `running`.
     */
    async settleAfterShutdown() {
      if (!unitsEndWithPlatform || !hostingAvailable()) return 0;
      let n = 0;
      for (const a of await agentsRepo.listAllAgents(db.kysely, { status: ['running'], limit: 10_000 })) {
        const s = await unitStatus(a.id);
        if (s === 'healthy' || s === 'starting' || s === 'running') continue;
        await agentsRepo.updateAgent(db.kysely, a.id, { status: 'provisioning' });
        n++;
      }
      return n;
    },
  };
}

export type DeploymentJobs = ReturnType<typeof createDeploymentJobs>;
