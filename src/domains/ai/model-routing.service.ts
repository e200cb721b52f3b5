/**
 * Which model serves an AI call (§4.9): the plan's allowed models, task selection, the
 * per-provider fallback chain, and running attempts with their own timeouts and the client's
 * abort. Part of the AI layer (ai.service.ts composes it).
 */

import type { Config } from '../../config/env.ts';
import { type CallSignal, Cancellation } from '../../lib/cancellation.ts';
import { createDeadlineList } from '../../lib/deadline-list.ts';
import { AppError, notFound } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { type Catalog, type CatalogModel, PROVIDER_CHAIN } from './catalog.service.ts';
import { type AiActor, allowedModelIds, selectModel, type TaskType } from './plan.rules.ts';
import { ProviderError } from './providers/provider.contract.ts';

export const clientGone = () => new AppError('CLIENT_CLOSED', 'Client closed request');
// hoisted: made once, not per attempt (every AI request runs an attempt)
const ONCE = { once: true } as const;
const timeOut = (attempt: Cancellation) => attempt.abort(new Error('AI_TIMEOUT_MS elapsed'));
const upstreamFailed = () => new AppError('AI_PROVIDER_ERROR', 'AI provider request failed');

/** How a provider attempt ended: `timeout` is AI_TIMEOUT_MS, `client_closed` the caller going away. */
export type ProviderOutcome = 'ok' | 'error' | 'timeout' | 'client_closed';

/**
 * Told about every provider attempt (the metrics of docs/metrics.md). Optional: without one the
 * attempt loop reads no clock and allocates nothing for it.
 */
export type ProviderObserver = {
  /** `seconds` until the provider answered (a stream: until it opened) or failed */
  onProviderCall(provider: string, model: string, seconds: number, outcome: ProviderOutcome): void;
  /** an attempt failed and the next model of the fallback chain is tried */
  onFallback(): void;
};

/** What withFallback answers: the model that served, its result, and the attempt's signal and release. */
export type Served<T> = { model: CatalogModel; result: T; release: () => void; signal: CallSignal };

export function createModelRouting(deps: {
  catalog: Catalog;
  config: Pick<Config, 'AI_TIMEOUT_MS'>;
  logger?: Logger | undefined;
  observer?: ProviderObserver | undefined;
}) {
  const { catalog, config, logger, observer } = deps;
  // AI_TIMEOUT_MS of every attempt: one shared timer, not one per call (../../lib/deadline-list.ts)
  const deadlines = createDeadlineList(config.AI_TIMEOUT_MS, timeOut);

  /** §4.9 Fallbacks: the requested model, then its provider's fallback (or primary, when the fallback was asked for). */
  function attemptsFor(m: CatalogModel): CatalogModel[] {
    const out = [m];
    if (m.provider !== 'custom') {
      const chain = PROVIDER_CHAIN[m.provider];
      const next = chain.fallback !== m.id ? chain.fallback : chain.primary;
      const alt = catalog.get(next);
      if (alt && alt.id !== m.id) out.push(alt);
    }
    return out.filter((a) => a.available);
  }

  /** Model resolution with the plan rules: 403 MODEL_RESTRICTED, 404 unknown, 503 provider unset. */
  function resolveModel(actor: AiActor, model: string | undefined, taskType: TaskType | undefined): CatalogModel {
    const allowed = allowedModelIds(actor, catalog.routerModels());
    if (model === undefined) {
      const picked = selectFor(actor, taskType ?? 'general');
      if (!picked) throw notFound('No model available');
      return picked;
    }
    if (allowed && !allowed.includes(model)) {
      throw new AppError('MODEL_RESTRICTED', 'This model is not available on your plan', { success: false, allowedModels: allowed });
    }
    const m = catalog.get(model);
    if (!m) {
      // the ids the caller could use instead, as OpenAI's clients show the message
      const usable = (allowed ?? catalog.list().map((c) => c.id)).filter((id) => catalog.get(id)?.available);
      throw notFound(
        `Model ${model.slice(0, 200)} not found. Models you can use: ${usable.join(', ') || 'none (no model provider is configured)'}`,
      );
    }
    if (!m.available) throw new AppError('PROVIDER_UNAVAILABLE', `The ${m.provider} provider is not configured`);
    return m;
  }

  function selectFor(actor: AiActor, taskType: TaskType): CatalogModel | undefined {
    const router = catalog.routerModels();
    const allowed = allowedModelIds(actor, router);
    return selectModel(allowed ? router.filter((m) => allowed.includes(m.id)) : router, taskType);
  }

  /**
   * Runs `run` on each attempt model until one succeeds. Each attempt gets its own signal (a
   * Cancellation: every AI request runs an attempt, and an AbortController costs microseconds):
   * aborted by the client's signal, and by AI_TIMEOUT_MS until `run` resolves. `release` ends the
   * link to the client signal (callers that stream call it when the stream ends).
   * A chain of `then`s, not an async function: the common call succeeds at its first attempt, and
   * the async function's generator, its resumption and its own promise showed in the proxy's
   * profile (docs/benchmarks.md "AI proxy", round 7). Always answers with a promise; a `run` that
   * throws counts as a failed attempt, as it did inside the async function.
   */
  function withFallback<T>(
    attempts: CatalogModel[],
    clientSignal: CallSignal | undefined,
    run: (m: CatalogModel, signal: CallSignal) => Promise<T>,
  ): Promise<Served<T>> {
    if (attempts.length === 0) return Promise.reject(new AppError('PROVIDER_UNAVAILABLE', 'No configured provider can serve this model'));
    const attemptAt = (i: number, last: unknown): Promise<Served<T>> => {
      if (i === attempts.length) {
        if (!(last instanceof ProviderError)) logger?.error({ err: last }, 'ai request failed');
        return Promise.reject(upstreamFailed());
      }
      if (clientSignal?.aborted) return Promise.reject(clientGone());
      if (i > 0) observer?.onFallback();
      const m = attempts[i]!;
      const attempt = new Cancellation();
      const onClientAbort = () => attempt.abort(clientSignal?.reason);
      clientSignal?.addEventListener('abort', onClientAbort, ONCE);
      const release = () => clientSignal?.removeEventListener('abort', onClientAbort);
      const deadline = deadlines.add(attempt);
      const started = observer ? performance.now() : 0;
      let pending: Promise<T>;
      try {
        pending = run(m, attempt);
      } catch (err) {
        pending = Promise.reject(err);
      }
      return pending.then(
        (result) => {
          deadlines.remove(deadline);
          observer?.onProviderCall(m.provider, m.id, (performance.now() - started) / 1000, 'ok');
          return { model: m, result, release, signal: attempt };
        },
        (err: unknown) => {
          deadlines.remove(deadline);
          release();
          if (observer) {
            const outcome = clientSignal?.aborted ? 'client_closed' : attempt.aborted ? 'timeout' : 'error';
            observer.onProviderCall(m.provider, m.id, (performance.now() - started) / 1000, outcome);
          }
          if (clientSignal?.aborted) throw clientGone();
          logger?.warn({ model: m.id, provider: m.provider, err: err instanceof Error ? err.message : String(err) }, 'ai attempt failed');
          return attemptAt(i + 1, err);
        },
      );
    };
    return attemptAt(0, undefined);
  }

  return { attemptsFor, resolveModel, selectFor, withFallback };
}
