/**
 * The code host's OAuth app flow (§4.1 GET /api/auth/codehost and its callback), GitHub-style:
 * authorize at `${CODEHOST_URL}/login/oauth/authorize`, exchange the code at
 * `${CODEHOST_URL}/login/oauth/access_token` (JSON answer), then read `${CODEHOST_API_URL}/user`
 * and `/user/emails`. OAuth apps take no PKCE or nonce: `state` (bound to the browser by the
 * sealed cookie, ./oauth-state.ts) is what ties the callback to the sign-in we started.
 */

export type CodehostSettings = {
  url: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  timeoutMs?: number;
};

export type CodehostIdentity = {
  subject: string;
  /** the primary address, and only when the code host has verified it */
  email: string | null;
  name: string | null;
  refreshToken: string | null;
};

/** The code was refused or the token answer was unusable: `/login?error=IdpTokenFailed`. */
export class CodehostTokenError extends Error {}

const trimSlash = (u: string) => u.replace(/\/+$/, '');

export function createCodehostClient(settings: CodehostSettings, fetchImpl: typeof fetch = fetch) {
  const base = trimSlash(settings.url);
  const api = trimSlash(settings.apiUrl);
  const timeout = () => AbortSignal.timeout(settings.timeoutMs ?? 10_000);

  async function getJson(path: string, accessToken: string): Promise<unknown> {
    const res = await fetchImpl(`${api}${path}`, {
      headers: { accept: 'application/json', authorization: `Bearer ${accessToken}`, 'user-agent': 'agent-platform' },
      signal: timeout(),
    });
    if (!res.ok) throw new Error(`code host ${path} answered ${res.status}`);
    return res.json();
  }

  return {
    authorizationUrl(state: string): string {
      const u = new URL(`${base}/login/oauth/authorize`);
      u.search = new URLSearchParams({
        client_id: settings.clientId,
        redirect_uri: settings.redirectUri,
        scope: 'read:user user:email',
        state,
        allow_signup: 'true',
      }).toString();
      return u.toString();
    },

    async exchange(code: string): Promise<CodehostIdentity> {
      let token: { access_token?: unknown; refresh_token?: unknown; error?: unknown };
      try {
        const res = await fetchImpl(`${base}/login/oauth/access_token`, {
          method: 'POST',
          headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({
            client_id: settings.clientId,
            client_secret: settings.clientSecret,
            code,
            redirect_uri: settings.redirectUri,
          }),
          signal: timeout(),
        });
        token = (await res.json()) as typeof token;
        if (!res.ok) throw new Error(`token endpoint answered ${res.status}`);
      } catch (err) {
        throw new CodehostTokenError((err as Error).message, { cause: err });
      }
      // GitHub answers 200 with {error: 'bad_verification_code'} for a refused code
      if (typeof token.access_token !== 'string' || !token.access_token) {
        throw new CodehostTokenError(typeof token.error === 'string' ? token.error.slice(0, 100) : 'no access token');
      }
      const accessToken = token.access_token;
      const user = (await getJson('/user', accessToken)) as { id?: unknown; name?: unknown; login?: unknown };
      if ((typeof user.id !== 'number' && typeof user.id !== 'string') || user.id === '') throw new Error('code host /user has no id');
      const emails = await getJson('/user/emails', accessToken);
      const primary = Array.isArray(emails)
        ? (emails as { email?: unknown; primary?: unknown; verified?: unknown }[]).find(
            (e) => e.primary === true && e.verified === true && typeof e.email === 'string',
          )
        : undefined;
      return {
        subject: String(user.id),
        email: (primary?.email as string | undefined) ?? null,
        name: typeof user.name === 'string' && user.name ? user.name : typeof user.login === 'string' ? user.login : null,
        refreshToken: typeof token.refresh_token === 'string' && token.refresh_token ? token.refresh_token : null,
      };
    },
  };
}

export type CodehostClient = ReturnType<typeof createCodehostClient>;
