/** Small zod building blocks shared by route schemas. */
import { z } from 'zod';
import { PUBLIC_ERROR_CODES } from '../../lib/error-codes.ts';

/** A JSON object body; a missing or non-object body gets this message. */
export const jsonBody = <T extends z.ZodRawShape>(shape: T) => z.object(shape, { error: 'Request body must be a JSON object' });

/**
 * `{ error }` (plus optional code) as every error response has it. The codes are listed, not
 * enforced as an enum: the response serializer must never turn an error into a 500.
 */
export const errorSchema = z
  .object({
    error: z.string(),
    code: z
      .string()
      .optional()
      .describe(`One of: ${PUBLIC_ERROR_CODES.join(', ')} (the catalogue with statuses is \`x-error-codes\` at the top of this document)`),
  })
  .loose()
  .describe('Error: `error` is a human-readable message; `code` a stable identifier where the specification names one');

export const okSchema = z.object({ ok: z.literal(true) });

/**
 * Request headers a route reads, for validation-free documentation: every header stays (loose),
 * each listed one is an optional string; the route checks the values itself.
 */
export const documentedHeaders = (headers: Record<string, string>) =>
  z.object(Object.fromEntries(Object.entries(headers).map(([name, text]) => [name, z.string().optional().describe(text)]))).loose();
