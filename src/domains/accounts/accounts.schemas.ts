/**
 * The zod schemas of the accounts API (src/http/web/routes/accounts.routes.ts, §4.1): sign-up,
 * sign-in, wallet sign-in and the profile, with §4.1's texts for each refusal.
 */
import { z } from 'zod';
import { LIMITS } from '../../config/limits.ts';

const REQUIRED = 'Email and password are required';
const EMAIL = z.regexes.email;
/** No C0 control characters or DEL: PostgreSQL text cannot hold NUL, and a name is one line. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/;
const NAME_CONTROL = 'Name must not contain control characters';

/** POST /api/register */
export const registerBody = z.object(
  {
    email: z
      .string({ error: REQUIRED })
      .trim()
      .min(1, { error: REQUIRED })
      .max(320, { error: 'Invalid email format' })
      .regex(EMAIL, { error: 'Invalid email format' }),
    password: z
      .string({ error: REQUIRED })
      .min(1, { error: REQUIRED })
      .min(LIMITS.passwordMinLength, { error: `Password must be at least ${LIMITS.passwordMinLength} characters` })
      .max(LIMITS.passwordMaxLength, { error: `Password must be at most ${LIMITS.passwordMaxLength} characters` }),
    name: z
      .string({ error: 'name must be a string' })
      .max(LIMITS.profileNameMax, { error: `Name must be at most ${LIMITS.profileNameMax} characters` })
      .regex(NO_CONTROL, { error: NAME_CONTROL })
      .optional(),
    referralCode: z
      .string({ error: 'Invalid referral code' })
      .trim()
      .max(LIMITS.referralCodeMaxLength, { error: 'Invalid referral code' })
      .regex(/^[A-Za-z0-9-]*$/, { error: 'Invalid referral code' })
      .optional()
      .describe('Alphanumeric with hyphens, at most 20 characters, case-insensitive; the new user and the referrer each get credit'),
    turnstileToken: z.string().max(4096).optional().describe('Bot-detection token (or header `cf-turnstile-response`)'),
  },
  { error: 'Request body must be a JSON object' },
);

/** POST /api/auth/login */
export const loginBody = z.object(
  {
    email: z
      .string({ error: REQUIRED })
      .trim()
      .min(1, { error: REQUIRED })
      .max(320, { error: 'Invalid credentials' })
      .regex(NO_CONTROL, { error: 'Invalid credentials' }),
    password: z.string({ error: REQUIRED }).min(1, { error: REQUIRED }).max(LIMITS.passwordMaxLength, { error: 'Invalid credentials' }),
  },
  { error: 'Request body must be a JSON object' },
);

const WALLET_REQUIRED = 'address, message and signature are required';
/** POST /api/wallet-auth (SIWE) */
export const walletBody = z.object(
  {
    address: z
      .string({ error: WALLET_REQUIRED })
      .min(1, { error: WALLET_REQUIRED })
      .regex(/^0x[0-9a-fA-F]{40}$/, { error: 'Invalid address' }),
    message: z.string({ error: WALLET_REQUIRED }).min(1, { error: WALLET_REQUIRED }).max(4096, { error: 'Message too long' }),
    signature: z
      .string({ error: WALLET_REQUIRED })
      .min(1, { error: WALLET_REQUIRED })
      .max(20_000, { error: 'Signature too long' })
      .regex(/^0x[0-9a-fA-F]*$/, { error: 'Signature must be 0x-prefixed hex' }),
  },
  { error: 'Request body must be a JSON object' },
);

/** POST and PATCH /api/user */
export const profileBody = z.object(
  {
    name: z
      .string({ error: 'name must be a string' })
      .regex(NO_CONTROL, { error: NAME_CONTROL })
      .optional()
      .describe(`1 to ${LIMITS.profileNameMax} characters after trim, no control characters`),
  },
  { error: 'Request body must be a JSON object' },
);

/** What a sign-in answers (the session is in the cookie). */
export const signedIn = z.object({ ok: z.literal(true), user: z.object({ id: z.string(), name: z.string() }) });
/** The current user (§4.1 "Current user and profile"). */
export const profile = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  plan: z.string(),
  credits: z.number(),
  twoFactorEnabled: z.boolean(),
  referralCode: z.string().describe('Added to the §4.1 shape: the code others enter at sign-up to credit this user'),
});
