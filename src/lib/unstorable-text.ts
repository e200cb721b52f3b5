/**
 * Text PostgreSQL cannot store as it was sent: a NUL character (text and jsonb refuse it) and an
 * unpaired UTF-16 surrogate (the driver encodes it to UTF-8 as U+FFFD in a text column, so what is
 * stored differs from what was sent; jsonb refuses its `\udXXX` escape). Input is checked with this
 * before anything is written, so such a request is a 400 instead of a 500 or a silently changed value.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching NUL is the point
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `s` holds a NUL character or an unpaired surrogate. */
export const hasUnstorableText = (s: string): boolean => UNSTORABLE.test(s);
