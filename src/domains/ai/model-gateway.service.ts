/**
 * The AI gateway agents call for their model (docs/agents.md "Model access"): OpenAI chat
 * completions in and out, authorised by the agent's own platform key instead of a provider key, so
 * an agent never holds ROUTER_API_KEY or any other provider key. The owner's plan decides which
 * models (§2), the monthly quota applies (§4.9, AI_QUOTA_ENFORCE), each agent has its own rate
 * limit, and every call is recorded as usage with the owner, the agent and the model that served.
 * Part of the AI layer: ai.service.ts composes it over the same routing, limits and usage store.
 *
 * OpenAI-compatible providers get the request as the agent wrote it (tool calls and results,
 * content parts, the allowed options) and their choices come back untouched; the Anthropic-type
 * provider is reached through the text chat and answers in the same wire format.
 * Length (~330 lines): the two wire formats (passthrough and text) each streamed and not, the usage
 * estimate of aborted streams, and what an agent's runtime is given (agentModelEnv).
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { CallSignal } from '../../lib/cancellation.ts';
import { AppError, badRequest } from '../../lib/errors.ts';
import type { SpendHold } from './ai.repo.ts';
import type { LimitVerdict } from './ai-limits.service.ts';
import type { Catalog, CatalogModel } from './catalog.service.ts';
import { AUTO_MODEL, DEFAULT_MODEL_ALIAS } from './model-choice.service.ts';
import type { createModelRouting, Served } from './model-routing.service.ts';
import { type AiActor, allowedModelIds } from './plan.rules.ts';
import {
  type ChatMessage,
  type ChatProvider,
  type PassthroughEvent,
  type PassthroughResult,
  ProviderError,
  type ProviderName,
  type StreamEvent,
  type Usage,
} from './providers/provider.contract.ts';
import { REQUEST_FAULTS } from './providers/provider-http.client.ts';
import { mostCost, type SpendGuard } from './spend-holds.service.ts';

/** The catalogue id a call asks for: the agent's own model for none or `default`, none (the plan's pick) for `auto`. */
const askedModel = (req: AgentChatRequest): string | undefined =>
  req.model === undefined || req.model === DEFAULT_MODEL_ALIAS ? req.agentModel : req.model === AUTO_MODEL ? undefined : req.model;

export type AgentChatRequest = {
  /**
   * a catalog id; omitted or `default`: the calling agent's own model (`agentModel`, its record's,
   * read at call time: a change applies at once); `auto`: the plan's pick
   */
  model: string | undefined;
  /** the calling agent's model (docs/agents.md "Model") */
  agentModel?: string | undefined;
  messages: Record<string, unknown>[];
  /** the request options passed on to the provider (the route's allow-list) */
  fields: Record<string, unknown>;
  /** stream_options.include_usage: a last chunk with `usage` and no choices */
  includeUsage?: boolean | undefined;
};

export type AgentCompletion = {
  id: string;
  object: 'chat.completion';
  created: number;
  /** the model that served (after any fallback) */
  model: string;
  provider: ProviderName;
  choices: Record<string, unknown>[];
  usage: Usage;
  system_fingerprint?: string;
};

export type AgentCompletionStream = {
  model: string;
  /** `chat.completion.chunk` objects, ready to send */
  chunks: AsyncIterable<Record<string, unknown>>;
};

/** Tokens of a text when the provider reported none (an aborted stream): about 4 characters per token. */
const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/**
 * The usage to bill when the provider reported none: a stream the agent aborted, or an upstream
 * that ignores `stream_options`. Without it an agent could cut every stream short and pay nothing.
 */
export function estimatedUsage(messages: unknown, completionChars: number): Usage {
  const prompt = estimateTokens(JSON.stringify(messages).length);
  const completion = estimateTokens(completionChars);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/**
 * With AI_BILLING=balance, the attempts whose model has a price (a fallback nobody priced is
 * skipped); none left: refused, naming the setting that prices it (never served free).
 */
export function pricedOnly(attempts: CatalogModel[]): CatalogModel[] {
  const priced = attempts.filter((m) => m.priced);
  if (priced.length > 0) return priced;
  throw new AppError(
    'MODEL_UNPRICED',
    `Model ${attempts[0]?.id ?? ''} has no price, so it cannot be paid from the balance: the operator prices it in ` +
      'MODEL_PRICES or on the admin page (Model prices).',
  );
}

/** Characters of what a streamed delta or a message carries (content and tool call arguments). */
function outputChars(part: unknown): number {
  const p = part as { content?: unknown; tool_calls?: { function?: { arguments?: unknown } }[] } | undefined;
  let n = typeof p?.content === 'string' ? p.content.length : 0;
  if (Array.isArray(p?.tool_calls)) for (const c of p.tool_calls) n += String(c?.function?.arguments ?? '').length + 16;
  return n;
}

/**
 * The agent's messages as text chat messages, for a provider without passthrough; undefined when
 * they carry what text chat cannot say (tool calls or results, images).
 */
function asTextMessages(req: AgentChatRequest): ChatMessage[] | undefined {
  if (req.fields.tools !== undefined || req.fields.tool_choice !== undefined || req.fields.response_format !== undefined) return undefined;
  const out: ChatMessage[] = [];
  for (const m of req.messages) {
    const role = m.role === 'developer' ? 'system' : m.role;
    if (role !== 'system' && role !== 'user' && role !== 'assistant') return undefined;
    if (m.tool_calls !== undefined) return undefined;
    let content: string;
    if (typeof m.content === 'string') content = m.content;
    else if (Array.isArray(m.content) && m.content.every((p) => (p as { type?: unknown })?.type === 'text')) {
      content = m.content.map((p) => String((p as { text?: unknown }).text ?? '')).join('');
    } else return undefined;
    out.push({ role, content });
  }
  return out;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** textOf when every attempt is passed through as it is (no text messages needed). */
const passedThrough = (): null => null;

/** A provider's refusal of the request itself (REQUEST_FAULTS), passed on to the agent instead of retried. */
class Rejected {
  readonly error: ProviderError;
  constructor(error: ProviderError) {
    this.error = error;
  }
}
const rejectedError = (r: Rejected) => {
  const message = r.error.upstreamMessage ?? 'The model provider rejected the request';
  return r.error.status === 413 ? new AppError('PAYLOAD_TOO_LARGE', message) : badRequest(message);
};
/** Runs an attempt; a request fault resolves (ends the fallback chain) instead of throwing. */
const orRejected = <T>(attempt: Promise<T>): Promise<T | Rejected> =>
  attempt.catch((err: unknown) => {
    if (err instanceof ProviderError && err.status !== undefined && REQUEST_FAULTS.has(err.status)) return new Rejected(err);
    throw err;
  });

export function createModelGateway(deps: {
  config: Pick<Config, 'AGENT_GATEWAY_RATE_LIMIT'>;
  catalog: Catalog;
  providers: Record<ProviderName, ChatProvider>;
  routing: ReturnType<typeof createModelRouting>;
  limitNow: (key: string, max: number, windowMs: number) => LimitVerdict;
  enforceQuota: (actor: AiActor) => Promise<void>;
  /** whether enforceQuota has anything to check for the actor */
  quotaApplies: (actor: AiActor) => boolean;
  record: (userId: string, agentId: string, m: CatalogModel, u: Usage, holds?: readonly SpendHold[], keyId?: string) => void;
  /**
   * Holds the most a call can cost (1e-10 USD units, asked only when there is a cap) against the
   * agent's caps before it starts; undefined (not a promise) when nothing caps the agent.
   */
  guard: Pick<SpendGuard, 'hold' | 'billing'>;
  /** gives back the holds of a call that ended without usage */
  release: (holds: readonly SpendHold[]) => void;
  now: () => Date;
}) {
  const { config, catalog, providers, limitNow, enforceQuota, quotaApplies, record, now } = deps;
  const { attemptsFor, resolveModel, withFallback } = deps.routing;

  type Prepared = { attempts: CatalogModel[]; textOf: (m: CatalogModel) => ChatMessage[] | null; hold?: readonly SpendHold[] | undefined };
  /**
   * The plan's checks, then the attempts with the text messages each needs (null: passthrough).
   * A request that cannot be said as text is refused here, before any attempt runs. Answers at once
   * (or throws) unless there is a quota to read: the common call makes no promise here.
   */
  function prepare(actor: AiActor, agentId: string, req: AgentChatRequest): Prepared | Promise<Prepared> {
    const model = resolveModel(actor, askedModel(req), 'general');
    if (quotaApplies(actor)) return enforceQuota(actor).then(() => held(actor, agentId, plan(model, req), req));
    return held(actor, agentId, plan(model, req), req);
  }

  /**
   * The plan with the call's holds against the caps it is under (docs/agents.md "Usage and
   * budgets"): the agent's budget, the API key's (actor.keyId), and with billing on the owner's
   * balance, when only priced models may serve it.
   */
  function held(actor: AiActor, agentId: string, prepared: Prepared, req: AgentChatRequest): Prepared | Promise<Prepared> {
    if (deps.guard.billing) prepared.attempts = pricedOnly(prepared.attempts);
    const hold = deps.guard.hold({ userId: actor.userId, agentId, keyId: actor.keyId }, () =>
      mostCost(prepared.attempts, req.messages, num(req.fields.max_tokens) ?? num(req.fields.max_completion_tokens)),
    );
    if (!hold) return prepared;
    return hold.then((h) => {
      prepared.hold = h;
      return prepared;
    });
  }

  function plan(model: CatalogModel, req: AgentChatRequest): Prepared {
    const attempts = attemptsFor(model);
    // the common case, every attempt passed through: no text to make (and no map of it per request)
    if (attempts.every((m) => providers[m.provider].passthrough)) return { attempts, textOf: passedThrough };
    const texts = new Map(attempts.map((m) => [m.id, textFor(req, m)]));
    return { attempts, textOf: (m: CatalogModel) => texts.get(m.id) ?? null };
  }

  const textParams = (req: AgentChatRequest, m: CatalogModel, messages: ChatMessage[], signal: CallSignal) => ({
    model: m.upstreamId,
    messages,
    temperature: num(req.fields.temperature),
    top_p: num(req.fields.top_p),
    max_tokens: num(req.fields.max_tokens) ?? num(req.fields.max_completion_tokens),
    signal,
  });

  /** The text messages for `m`'s provider when it has no passthrough; 400 when they cannot be said as text. */
  const textFor = (req: AgentChatRequest, m: CatalogModel): ChatMessage[] | null => {
    if (providers[m.provider].passthrough) return null;
    const text = asTextMessages(req);
    if (!text) {
      throw badRequest(
        `Model ${m.id} takes text messages only through this gateway (no tools, tool results, images or response_format); ` +
          'choose a model served by an OpenAI-compatible provider',
      );
    }
    return text;
  };

  const seconds = () => Math.floor(now().getTime() / 1000);

  return {
    /** Model calls per minute per agent (AGENT_GATEWAY_RATE_LIMIT), keyed by the agent, not its address. */
    agentRateLimit: (agentId: string) => limitNow(`ai-agent:${agentId}`, config.AGENT_GATEWAY_RATE_LIMIT, LIMITS.aiWindowMs),

    /** GET /models: the plan's models that can be served now, in OpenAI's list shape. */
    agentModels(actor: AiActor) {
      const allowed = allowedModelIds(actor, catalog.routerModels());
      const models = (allowed ? allowed.map((id) => catalog.get(id)) : catalog.list()).filter(
        (m): m is CatalogModel => m?.available === true,
      );
      return {
        object: 'list' as const,
        data: models.map((m) => ({
          id: m.id,
          object: 'model' as const,
          created: 0,
          owned_by: m.id.slice(0, Math.max(0, m.id.indexOf('/'))) || m.provider,
          name: m.name,
          context_length: m.contextWindow,
        })),
      };
    },

    /**
     * POST /chat/completions without streaming. `then`s, not an async function (the proxy's hot path,
     * docs/benchmarks.md "AI proxy", round 7): every refusal is still a rejection.
     */
    agentCompletion(actor: AiActor, agentId: string, req: AgentChatRequest, signal?: CallSignal): Promise<AgentCompletion> {
      let ready: Prepared | Promise<Prepared>;
      try {
        ready = prepare(actor, agentId, req);
      } catch (err) {
        return Promise.reject(err);
      }
      const complete = ({ attempts, textOf, hold }: Prepared) =>
        // each attempt is the provider's own promise (and a continuation), not an async wrapper around it
        withFallback(attempts, signal, (m, s): Promise<PassthroughResult | Rejected> => {
          const text = textOf(m);
          if (!text)
            return orRejected(
              providers[m.provider].passthrough!({ model: m.upstreamId, messages: req.messages, fields: req.fields, signal: s }),
            );
          return providers[m.provider].chat(textParams(req, m, text, s)).then((r) => ({
            id: r.id,
            created: undefined,
            choices: [{ index: 0, message: { role: 'assistant', content: r.content }, finish_reason: 'stop' }],
            usage: r.usage,
            systemFingerprint: undefined,
          }));
        }).then(
          ({ model, result, release }): AgentCompletion => {
            release();
            if (result instanceof Rejected) {
              if (hold) deps.release(hold);
              throw rejectedError(result);
            }
            const usage =
              result.usage.total_tokens > 0
                ? result.usage
                : estimatedUsage(
                    req.messages,
                    result.choices.reduce((n, c) => n + outputChars(c.message), 0),
                  );
            record(actor.userId, agentId, model, usage, hold, actor.keyId);
            return {
              id: result.id || `chatcmpl-${randomUUID()}`,
              object: 'chat.completion',
              created: result.created ?? seconds(),
              model: model.id,
              provider: model.provider,
              choices: result.choices,
              usage,
              ...(result.systemFingerprint ? { system_fingerprint: result.systemFingerprint } : {}),
            };
          },
          (err: unknown) => {
            if (hold) deps.release(hold);
            throw err;
          },
        );
      return ready instanceof Promise ? ready.then(complete) : complete(ready);
    },

    /**
     * POST /chat/completions with `stream: true`. Errors before the first chunk (plan, quota, every
     * attempt failing) throw; fallback happens while opening. Usage is recorded when the stream
     * ends, however it ends: the provider's count, or an estimate when it sent none (aborted).
     */
    async agentCompletionStream(
      actor: AiActor,
      agentId: string,
      req: AgentChatRequest,
      signal: CallSignal,
    ): Promise<AgentCompletionStream> {
      const { attempts, textOf, hold } = await prepare(actor, agentId, req);
      let opened: Served<AsyncIterable<PassthroughEvent> | Rejected>;
      try {
        opened = await withFallback(attempts, signal, async (m, s) => {
          const text = textOf(m);
          if (!text)
            return orRejected(
              providers[m.provider].passthroughStream!({ model: m.upstreamId, messages: req.messages, fields: req.fields, signal: s }),
            );
          return textEvents(await providers[m.provider].stream(textParams(req, m, text, s)));
        });
      } catch (err) {
        if (hold) deps.release(hold);
        throw err;
      }
      const { model, result: upstream, release } = opened;
      if (upstream instanceof Rejected) {
        release();
        if (hold) deps.release(hold);
        throw rejectedError(upstream);
      }
      const id = `chatcmpl-${randomUUID()}`;
      const created = seconds();
      const head = { id, object: 'chat.completion.chunk', created, model: model.id };
      const includeUsage = req.includeUsage === true;
      const chunks = (async function* () {
        let usage: Usage | null = null;
        let chars = 0;
        try {
          for await (const ev of upstream) {
            if (ev.type === 'done') {
              usage = ev.usage;
              continue;
            }
            // the usage goes out once, last, and only when asked for (OpenAI's stream_options)
            const { usage: _counted, ...chunk } = ev.chunk;
            const choices = Array.isArray(chunk.choices) ? (chunk.choices as { delta?: unknown }[]) : [];
            for (const c of choices) chars += outputChars(c.delta);
            if (choices.length > 0) yield { ...chunk, ...head };
          }
        } finally {
          release();
          usage = usage && usage.total_tokens > 0 ? usage : estimatedUsage(req.messages, chars);
          record(actor.userId, agentId, model, usage, hold, actor.keyId);
        }
        if (includeUsage) yield { ...head, choices: [], usage };
      })();
      return { model: model.id, chunks };
    },
  };
}

/** A text stream (Anthropic-type provider) as OpenAI chunks: a role chunk, content deltas, a finish chunk. */
async function* textEvents(events: AsyncIterable<StreamEvent>): AsyncGenerator<PassthroughEvent> {
  yield { type: 'chunk', chunk: { choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] } };
  for await (const ev of events) {
    if (ev.type === 'delta') {
      yield { type: 'chunk', chunk: { choices: [{ index: 0, delta: { content: ev.text }, finish_reason: null }] } };
    } else {
      yield { type: 'chunk', chunk: { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] } };
      yield { type: 'done', usage: ev.usage };
    }
  }
}
