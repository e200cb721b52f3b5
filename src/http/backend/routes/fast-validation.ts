/**
 * A route's validatorCompiler with hand-written checks in front of the zod schemas (the AI hot
 * paths: ai-chat.schemas.ts, model-gateway.schemas.ts; docs/benchmarks.md "AI proxy"). For each
 * request part with a check, the check's value when it vouches for the input, else zod's validator of
 * the same schema, so every rejection and its text stays zod's; the other parts are zod's alone.
 */
import type { FastifySchemaValidationError } from 'fastify';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';

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
