/**
 * A route's validatorCompiler with hand-written checks in front of the zod schemas (the AI hot
 * paths, whose checks are src/domains/ai/ai-chat.schemas.ts and model-gateway.schemas.ts; docs/benchmarks.md
 * "AI proxy"). For each
 * request part with a check, the check's value when it vouches for the input, else zod's validator of
 * the same schema, so every rejection and its text stays zod's; the other parts are zod's alone.
 */
import type { FastifySchemaValidationError } from 'fastify';
import { serializerCompiler as zodSerializerCompiler, validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { type Completion, fastChatBody, fastCompletionBody, fastCompletionJson, stringHeaders } from '../../../domains/ai/index.ts';

type Validated = { value?: unknown; error?: FastifySchemaValidationError[] | Error };
type RouteSchema = { schema: unknown; method: string; url: string; httpPart?: string };

/** A check: what zod would output for `data`, or undefined when zod must decide. */
export type FastCheck = (data: unknown) => unknown;

export function fastThenZod(checks: Partial<Record<'body' | 'headers' | 'querystring' | 'params', FastCheck>>) {
  return (route: RouteSchema) => {
    const zod = zodValidatorCompiler(route as never) as (data: unknown) => Validated;
    const fast = route.httpPart ? checks[route.httpPart as keyof typeof checks] : undefined;
    if (!fast) return zod;
    return (data: unknown): Validated => {
      const value = fast(data);
      return value === undefined ? zod(data) : { value };
    };
  };
}

/** POST /api/ai/chat's validatorCompiler: the fast check for the body and the documented headers, each falling back to zod. */
export const chatValidatorCompiler = (headerNames: readonly string[]) =>
  fastThenZod({ body: fastChatBody, headers: stringHeaders(headerNames) });

/** The model gateway's validatorCompiler: the fast check for the body, falling back to zod's validator of the same schema. */
export const completionValidatorCompiler = (fields: readonly string[]) => fastThenZod({ body: (data) => fastCompletionBody(fields, data) });

/** The model gateway's serializerCompiler: the 200 answer through fastCompletionJson, falling back to zod's serializer. */
export function completionSerializerCompiler(route: { httpStatus?: string; schema: unknown; method: string; url: string }) {
  const zod = zodSerializerCompiler(route as never) as (data: unknown) => string;
  if (route.httpStatus !== '200') return zod;
  return (data: unknown) => fastCompletionJson(data as Completion) ?? zod(data);
}
