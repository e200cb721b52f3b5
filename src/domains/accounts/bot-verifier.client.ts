/**
 * Bot detection on sign-up through a Turnstile-style siteverify endpoint (form POST of
 * `secret`, `response`, `remoteip`; JSON `{success}` back). Off when TURNSTILE_SECRET_KEY is unset.
 */
export interface BotVerifier {
  /** true when the token proves a human; false for a missing, invalid or unverifiable token. */
  verify(token: string | undefined, remoteIp: string): Promise<boolean>;
}

export const allowAllBotVerifier: BotVerifier = { verify: async () => true };

export function createSiteverifyBotVerifier(options: { secret: string; url: string; timeoutMs?: number }): BotVerifier {
  return {
    async verify(token, remoteIp) {
      if (!token) return false;
      try {
        const res = await fetch(options.url, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ secret: options.secret, response: token, remoteip: remoteIp }),
          signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
        });
        if (!res.ok) return false;
        const body = (await res.json()) as { success?: unknown };
        return body.success === true;
      } catch {
        // fail closed: when the verifier is unreachable we cannot tell a bot from a person
        return false;
      }
    },
  };
}
