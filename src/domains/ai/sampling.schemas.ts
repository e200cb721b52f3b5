/**
 * The numeric sampling and token fields both AI bodies take (POST /api/ai/chat, ai-chat.schemas.ts;
 * the model gateway, model-gateway.schemas.ts), each refusal naming the field as `label` does:
 * the two APIs word their field names differently ("Parameter top_p", "top_p").
 */
import { z } from 'zod';

/** A number from `min` to `max`. */
export const numberBetween = (label: string, min: number, max: number) =>
  z
    .number({ error: `${label} must be a number` })
    .min(min, { error: `${label} must be between ${min} and ${max}` })
    .max(max, { error: `${label} must be between ${min} and ${max}` });

/** A token count: a whole number from 1 to a million. */
export const tokenLimit = (label: string) =>
  z
    .number({ error: `${label} must be a positive integer` })
    .int({ error: `${label} must be a positive integer` })
    .min(1, { error: `${label} must be a positive integer` })
    .max(1_000_000, { error: `${label} is too large` });
