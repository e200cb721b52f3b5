/**
 * Passwords people pick first are the ones attackers try first. We refuse the 49,000-odd most
 * common passwords of the list `@zxcvbn-ts/language-common` ships (maintained with zxcvbn-ts,
 * checked offline, compared case-insensitively) at registration and at every password change.
 * docs/security.md "Password sign-in".
 */
import { dictionary } from '@zxcvbn-ts/language-common';

let common: Set<string> | undefined;

/** true when `password` is on the common-password list (case-insensitive). */
export function isCommonPassword(password: string): boolean {
  // built on first use (~50 ms): processes that never register never pay for it
  common ??= new Set(dictionary['passwords-common'].map((p) => p.toLowerCase()));
  return common.has(password.toLowerCase());
}

export const COMMON_PASSWORD_MESSAGE = 'Password is too common; choose a less guessable one';
