/**
 * One lifecycle transition of an agent at a time in this process (docs/agents.md "Lifecycle under
 * concurrency"). A transition is a change of the agent's record (its status, a deployment job)
 * together with the hosting driver call that makes it true: Stop's "stopped" and the driver's stop,
 * a deployment's "is it still wanted?" and the driver's deploy, a watchdog repair's "is it still
 * meant to run?" and the driver's restart. Run under one agent's lock, the record and the driver
 * see the transitions in the same order, so the status read at the end is what runs: a Stop that
 * lands between a deployment's check and its deploy would otherwise leave `stopped` in the record
 * and a process running.
 *
 * The lock covers the database writes and the moment the driver call is made, not the wait for it:
 * the driver runs one agent's calls in the order they were made (the local driver's queue), and a
 * Stop never waits behind a deployment's 60 s health wait. The deployment jobs, the lifecycle
 * routes and the watchdog are given the same instance (src/platform.ts).
 */

import { createKeyedQueue } from '../../lib/keyed-queue.ts';

export function createLifecycleLocks() {
  return {
    /** Runs `fn` once every earlier transition of `agentId` in this process has finished; in arrival order. */
    run: createKeyedQueue(),
  };
}

export type LifecycleLocks = ReturnType<typeof createLifecycleLocks>;
