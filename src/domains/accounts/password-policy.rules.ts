/**
 * Passwords people pick first are the ones attackers try first. We refuse the 49,000-odd most
 * common passwords of the list `@zxcvbn-ts/language-common` ships (maintained with zxcvbn-ts,
 * checked offline, compared case-insensitively) at registration and at every password change.
 * docs/security.md "Password sign-in".
 */
let common: Promise<Set<string>> | undefined;

/** true when `password` is on the common-password list (case-insensitive). */
export async function isCommonPassword(password: string): Promise<boolean> {
  // loaded and built on first use (~50 ms): the package's dictionaries hold about 15 MB, which
  // processes that never register never pay for (docs/benchmarks.md "memory")
  common ??= import('@zxcvbn-ts/language-common').then(
    ({ dictionary }) => new Set(dictionary['passwords-common'].map((p) => p.toLowerCase())),
  );
  return (await common).has(password.toLowerCase());
}

export const COMMON_PASSWORD_MESSAGE = 'Password is too common; choose a less guessable one';
