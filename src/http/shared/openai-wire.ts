/**
 * OpenAI's wire format where the platform speaks it (docs/agents.md "Model access"): the model
 * gateway agents call answers every error as OpenAI does (`{error:{message,type,code,param}}`), so
 * the OpenAI client in an agent passes the platform's refusals on as it would OpenAI's own, and
 * streams chat completion chunks ending with `data: [DONE]`; the agent proxy refuses a body nested
 * too deep in the same error shape. The one place that maps the error catalogue to OpenAI's
 * `type` and `code`, and that frames OpenAI's event stream.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { KEY_LIMITS_DESCRIPTION } from '../../domains/keys/index.ts';
import type { ErrorCode } from '../../lib/error-codes.ts';
import { type AppError, isAppError } from '../../lib/errors.ts';
import { writeEventStream } from './sse.ts';

/** OpenAI's error shape, as the model gateway documents each of its error responses. */
export const openAiErrorSchema = z
  .object({
    error: z.looseObject({
      message: z.string(),
      type: z.string().describe('invalid_request_error, authentication_error, permission_error, not_found_error, rate_limit_error, ...'),
      code: z
        .string()
        .nullable()
        .describe('a stable identifier: invalid_api_key, model_not_found, model_restricted, insufficient_quota, budget_exceeded, ...'),
      param: z.string().nullable(),
    }),
  })
  .describe("OpenAI's error shape");

/** The agent proxy's own refusal on a path whose answers are the agent's, in OpenAI's shape (src/domains/agents/agent-client/agent-model.rules.ts `tooDeepChatBody`). */
export const tooDeepErrorSchema = z
  .object({
    error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
  })
  .describe("OpenAI's error shape: a body nested too deep");

/** OpenAI's error `type` by status. */
const TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
};
/** Where OpenAI has its own `code` (and `type`) for the same refusal; otherwise the catalogue's name in lower case. */
const OPENAI_CODES: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: 'invalid_api_key',
  NOT_FOUND: 'model_not_found',
  AI_RATE_LIMITED: 'rate_limit_exceeded',
  QUOTA_EXCEEDED: 'insufficient_quota',
  AGENT_BUDGET_EXCEEDED: 'budget_exceeded',
  KEY_RATE_LIMITED: 'rate_limit_exceeded',
};
// OpenAI answers a spent quota with 429 `insufficient_quota`; its clients do not retry that type
const OPENAI_TYPES: Partial<Record<ErrorCode, string>> = {
  QUOTA_EXCEEDED: 'insufficient_quota',
  AGENT_BUDGET_EXCEEDED: 'insufficient_quota',
  KEY_BUDGET_EXCEEDED: 'insufficient_quota',
};

export type OpenAiErrorBody = z.infer<typeof openAiErrorSchema>;

/** An error body in OpenAI's shape; `type` defaults to OpenAI's for the status. */
export const openAiErrorBody = (
  status: number,
  message: string,
  code: string,
  extra: Record<string, unknown> = {},
  type?: string,
): OpenAiErrorBody => ({
  error: {
    message,
    type: type ?? TYPE_BY_STATUS[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
    code,
    param: null,
    ...extra,
  },
});

/** Any error of a route (its scope's key check included) in OpenAI's shape, with the status the platform gives it. */
function toOpenAiError(err: FastifyError | AppError, request: FastifyRequest, failed: string): { status: number; body: OpenAiErrorBody } {
  if (isAppError(err)) {
    if (err.status >= 500) request.log.error({ err }, failed);
    const { success: _s, ...extra } = err.extra ?? {};
    const body = openAiErrorBody(err.status, err.message, OPENAI_CODES[err.id] ?? err.id.toLowerCase(), extra, OPENAI_TYPES[err.id]);
    return { status: err.status, body };
  }
  if (err.validation) {
    const first = err.validation[0];
    const field = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.');
    const message = first?.message ?? err.message;
    // our schema messages name their field; zod's own ("Invalid input…") get it prefixed
    return {
      status: 400,
      body: openAiErrorBody(400, field && /^[A-Z]/.test(message) ? `${field}: ${message}` : message, 'invalid_request'),
    };
  }
  if ((err.statusCode ?? 500) < 500) {
    const status = err.statusCode === 413 ? 413 : 400;
    const json = err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError;
    return { status, body: openAiErrorBody(status, json ? 'Body is not valid JSON' : err.message, 'invalid_request') };
  }
  request.log.error({ err }, failed);
  return { status: 500, body: openAiErrorBody(500, 'Internal server error', 'unexpected') };
}

/**
 * A Fastify error handler that answers every error in OpenAI's shape (`Retry-After` on a 429
 * that says when); `failed` is the log line of a 5xx.
 */
export function openAiErrorHandler(failed: string) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const { status, body } = toOpenAiError(err, request, failed);
    const retryAfter = body.error.retryAfter;
    if (status === 429 && typeof retryAfter === 'number') reply.header('retry-after', String(retryAfter));
    return reply.code(status).send(body);
  };
}

/**
 * An API key's own refusals on the agent proxy (docs/payments.md "API keys"): its rate limit (the
 * account scope) and its budget (the proxy) are answered in OpenAI's shape on the agent's
 * OpenAI-compatible paths (`/api/agents/:id/v1/…`, `/v1/…` on its own host), where the `openai`
 * client reads them; every other error of the proxy goes to the app's own handler as it is.
 */
export const KEY_LIMITS = {
  description: KEY_LIMITS_DESCRIPTION,
  responses: { 402: openAiErrorSchema, 429: openAiErrorSchema },
  errorHandler(err: FastifyError | AppError, request: FastifyRequest, reply: FastifyReply) {
    const url = request.routeOptions.url ?? '';
    const openAiPath = url.startsWith('/api/agents/:id/v1/') || (url === '/*' && request.url.startsWith('/v1/'));
    if (isAppError(err) && (err.id === 'KEY_RATE_LIMITED' || err.id === 'KEY_BUDGET_EXCEEDED') && openAiPath)
      return keyLimitAnswer(err as FastifyError, request, reply);
    throw err;
  },
};
const keyLimitAnswer = openAiErrorHandler('agent proxy request failed');

/** What a provider that fails mid-stream leaves in an OpenAI stream (the status is long sent). */
const STREAM_FAILED = `data: ${JSON.stringify(openAiErrorBody(500, 'AI provider request failed', 'ai_provider_error'))}\n\n`;

/**
 * OpenAI's chat completion stream: each chunk as a `data:` event, then `data: [DONE]`; a failure
 * after the stream started is one error event in OpenAI's shape, logged as `failed`.
 */
export function writeOpenAiStream(request: FastifyRequest, reply: FastifyReply, chunks: AsyncIterable<unknown>, failed: string) {
  return writeEventStream(request, reply, chunks, {
    frame: (chunk) => `data: ${JSON.stringify(chunk)}\n\n`,
    last: 'data: [DONE]\n\n',
    failure: { log: failed, frame: STREAM_FAILED },
  });
}
