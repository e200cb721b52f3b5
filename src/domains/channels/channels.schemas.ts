/** Requests and answers of the channel routes (docs/channels.md "API"). */
import { z } from 'zod';

export const channelKind = z.enum(['telegram', 'discord']);

export const channelParams = z.object({ id: z.string().min(1).max(64), kind: channelKind });

export const channelBody = z.object({
  botToken: z
    .string()
    .trim()
    .min(20, { error: 'botToken looks too short for a bot token' })
    .max(200)
    .optional()
    .describe(
      'The bot token from BotFather (Telegram) or the Developer Portal (Discord); required to connect, optional to change settings',
    ),
  allowFrom: z
    .array(z.string().trim().min(1).max(64))
    .max(500)
    .optional()
    .describe('§2 channels.<name>.allowFrom: user ids or @names allowed to talk to the agent; empty allows everyone'),
  enabled: z.boolean().optional().describe('default true'),
});

export const channel = z.object({
  kind: channelKind,
  bot: z.object({ id: z.string(), username: z.string() }).nullable().describe('the bot the token belongs to, as the provider reports it'),
  tokenHint: z.string().describe('•••• and the last 4 characters of the token; the token itself is never answered'),
  allowFrom: z.array(z.string()),
  enabled: z.boolean(),
  status: z.enum(['connecting', 'connected', 'error', 'disabled']),
  error: z.string().nullable().describe('why the connection failed (status `error`); it is retried with backoff'),
  createdAt: z.string(),
  updatedAt: z.string(),
});

export const channelList = z.object({
  channels: z.array(channel),
  senders: z.array(
    z.object({
      kind: z.string(),
      id: z.string(),
      username: z.string().nullable(),
      displayName: z.string().nullable(),
      messages: z.number(),
      allowed: z.boolean(),
      lastSeenAt: z.string(),
    }),
  ),
  pairings: z.array(
    z.object({
      kind: z.string(),
      code: z.string(),
      senderId: z.string(),
      username: z.string().nullable(),
      createdAt: z.string(),
      expiresAt: z.string(),
    }),
  ),
});

export const pairingParams = channelParams.extend({ code: z.string().trim().min(4).max(16) });
export const approvedPairing = z.object({ success: z.literal(true), senderId: z.string(), username: z.string().nullable() });
